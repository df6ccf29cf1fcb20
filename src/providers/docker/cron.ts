/**
 * Runs cron services: a deployment leaves a created-but-never-started *template* container labelled
 * with its schedule; each tick starts a copy of it (role cron-run). The schedules are rebuilt from the
 * templates Docker holds, at start and every few seconds, so a restart or a deploy made by another
 * process is picked up. It runs in `berth serve` only, and schedules only the templates of services in
 * its own database: another Berth sharing the Docker engine keeps its own. Every `berth serve` of that
 * database schedules them; a tick is claimed there first (engine/cron-ticks.ts), so it runs once.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { claimTick, SERVICE_TICK, tickTime } from '../engine/cron-ticks.ts';
import { ENGINE_CALL_MS, engineDeadline } from '../engine/deadlines.ts';
import { LABEL, labelFilter } from '../engine/labels.ts';
import { Schedules } from '../engine/schedules.ts';
import type { DockerDb } from '../engine/tables.ts';

const RUNS_KEPT = 3;

/**
 * The docker driver's cron schedules. `ownServices` says which of the services labelled on templates
 * are this database's (another Berth sharing the engine keeps its own templates). A tick's Engine calls
 * are abandoned after `engineMs` each (engine/deadlines.ts).
 */
export function dockerCron(
  docker: Docker,
  db: DockerDb,
  logger: Logger,
  ownServices: (ids: string[]) => Promise<Set<string>>,
  engineMs = ENGINE_CALL_MS,
): Schedules {
  const deadline = () => engineDeadline(engineMs);
  /** The templates of this database's services, by container id, with their schedules. */
  const templates = async (): Promise<Map<string, string>> => {
    const listed = await docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.role]: 'cron-template' }),
      ...deadline(),
    });
    const ours = await ownServices(listed.map((t) => t.Labels[LABEL.service] ?? ''));
    const wanted = new Map<string, string>();
    for (const template of listed) {
      const schedule = template.Labels[LABEL.cronSchedule];
      if (ours.has(template.Labels[LABEL.service] ?? '') && schedule) wanted.set(template.Id, schedule);
    }
    return wanted;
  };
  // Two templates of one service (a rollout) tick in one process: one decides at a time.
  const ticking = new Set<string>();
  /**
   * One run: a copy of the template, started; the oldest finished runs beyond a few are removed.
   * Concurrency policy Forbid (Kubernetes' name): a tick while a run of the service is still alive is
   * skipped, so a long command never piles up runs.
   */
  const tick = async (templateId: string, at: Date): Promise<void> => {
    const template = await docker.getContainer(templateId).inspect(deadline());
    const service = template.Config.Labels[LABEL.service] ?? '';
    if (ticking.has(service)) return;
    ticking.add(service);
    try {
      if (!(await claimTick(db, service, SERVICE_TICK, at))) {
        logger.debug(
          { service, tick: tickTime(at).toISOString() },
          'cron tick claimed by another Berth process',
        );
        return;
      }
      const alive = await docker.listContainers({
        all: true,
        filters: labelFilter({ [LABEL.service]: service, [LABEL.role]: 'cron-run' }),
        ...deadline(),
      });
      if (alive.some((c) => c.State !== 'exited' && c.State !== 'dead')) {
        logger.info({ service }, 'cron tick skipped: the previous run is still running');
        return;
      }
      await startRun(docker, templateId, template, deadline);
      logger.info({ service, tick: tickTime(at).toISOString() }, 'cron run started');
    } finally {
      ticking.delete(service);
    }
  };
  return new Schedules(logger, templates, tick);
}

async function startRun(
  docker: Docker,
  templateId: string,
  template: Docker.ContainerInspectInfo,
  deadline: () => { abortSignal: AbortSignal },
): Promise<void> {
  const labels: Record<string, string> = { ...template.Config.Labels, [LABEL.role]: 'cron-run' };
  const network = template.HostConfig.NetworkMode ?? 'bridge';
  const run = await docker.createContainer({
    Image: template.Config.Image,
    Cmd: template.Config.Cmd ?? undefined,
    Entrypoint: template.Config.Entrypoint ?? undefined,
    Env: template.Config.Env ?? undefined,
    Labels: labels,
    HostConfig: {
      NetworkMode: network,
      NanoCpus: template.HostConfig.NanoCpus,
      Memory: template.HostConfig.Memory,
    },
    ...deadline(),
  });
  // A delete removes the template first, then lists and removes every container of the service: a
  // run created after that listing finds its template gone here and never starts.
  const templateLeft = await docker
    .getContainer(templateId)
    .inspect(deadline())
    .then(
      () => true,
      () => false,
    );
  if (!templateLeft) {
    await run.remove({ force: true, ...deadline() }).catch(() => undefined);
    return;
  }
  await run.start(deadline());
  const service = labels[LABEL.service] as string;
  const runs = await docker.listContainers({
    all: true,
    filters: labelFilter({ [LABEL.service]: service, [LABEL.role]: 'cron-run' }),
    ...deadline(),
  });
  const finished = runs.filter((c) => c.State === 'exited').sort((a, b) => b.Created - a.Created);
  for (const old of finished.slice(RUNS_KEPT))
    await docker.getContainer(old.Id).remove({ force: true, ...deadline() });
}

/**
 * Runs cron services on the swarm. A cron deployment leaves a *template* (a swarm service of no
 * replicas, labelled with its schedule); each tick starts a replicated-job copy of it (role cron-run)
 * that the swarm places on any node. Every `berth serve` schedules every routed template; the tick is
 * claimed in the database first (engine/cron-ticks.ts), so it runs once however many Berth processes
 * there are. Concurrency policy Forbid, as the docker driver's.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { claimTick, SERVICE_TICK, tickTime } from '../engine/cron-ticks.ts';
import { ENGINE_CALL_MS, engineDeadline } from '../engine/deadlines.ts';
import { LABEL, labelFilter } from '../engine/labels.ts';
import { Schedules } from '../engine/schedules.ts';
import { REMOVED_GENERATION } from '../provider.ts';
import { sweepSecrets } from './secrets.ts';
import { jobEnded, tasksOf } from './services.ts';
import type { SwarmDb } from './tables.ts';

/** Finished runs kept (their logs are the service's logs), besides the one under way. */
const RUNS_KEPT = 3;

type Deadline = () => { abortSignal: AbortSignal };

/** The swarm driver's cron schedules; each Engine call of a tick or a rescan is abandoned after `engineMs`. */
export function swarmCron(docker: Docker, db: SwarmDb, logger: Logger, engineMs = ENGINE_CALL_MS): Schedules {
  const deadline = () => engineDeadline(engineMs);
  return new Schedules(
    logger,
    () => templates(docker, db, deadline),
    (id, at) => tick(docker, db, logger, deadline, id, at),
  );
}

/** The templates of the deployments that serve (a superseded template never ticks), with their schedules. */
async function templates(docker: Docker, db: SwarmDb, deadline: Deadline): Promise<Map<string, string>> {
  const listed = await docker.listServices({
    filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.role]: 'cron-template' }),
    ...deadline(),
  });
  const routes = await db
    .selectFrom('docker_routes')
    .select('deployment_id')
    .where('type', '=', 'cron')
    .where('generation', '<', REMOVED_GENERATION)
    .execute();
  const serving = new Set(routes.map((r) => r.deployment_id));
  const wanted = new Map<string, string>();
  for (const template of listed) {
    const labels = template.Spec?.Labels ?? {};
    const schedule = labels[LABEL.cronSchedule];
    if (schedule && serving.has(labels[LABEL.deployment] ?? '')) wanted.set(template.ID, schedule);
  }
  return wanted;
}

async function tick(
  docker: Docker,
  db: SwarmDb,
  logger: Logger,
  deadline: Deadline,
  templateId: string,
  at: Date,
): Promise<void> {
  const template = await docker.getService(templateId).inspect(deadline());
  const labels: Record<string, string> = template.Spec?.Labels ?? {};
  const serviceId = labels[LABEL.service] ?? '';
  const tickAt = tickTime(at);
  if (!(await claimTick(db, serviceId, SERVICE_TICK, tickAt))) {
    logger.debug(
      { service: serviceId, tick: tickAt.toISOString() },
      'cron tick claimed by another Berth process',
    );
    return;
  }
  const runs = await docker.listServices({
    filters: labelFilter({ [LABEL.service]: serviceId, [LABEL.role]: 'cron-run' }),
    ...deadline(),
  });
  for (const run of runs) {
    if (!jobEnded(await tasksOf(docker, run.ID, deadline()))) {
      logger.info({ service: serviceId }, 'cron tick skipped: the previous run is still running');
      return;
    }
  }
  const name = `berth-run-${(labels[LABEL.deployment] ?? '').slice(0, 8)}-${tickAt.getTime() / 1000}`;
  await docker.createService({
    Name: name,
    Labels: { ...labels, [LABEL.role]: 'cron-run', [LABEL.cronSchedule]: '' },
    TaskTemplate: template.Spec?.TaskTemplate,
    Mode: { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } },
    ...deadline(),
  });
  logger.info({ service: serviceId, tick: tickAt.toISOString(), run: name }, 'cron run started');
  // A delete removes the templates first, then every service of the Berth service: a run created
  // after that listing finds its template gone here and removes itself.
  const left = await docker
    .getService(templateId)
    .inspect(deadline())
    .then(
      () => true,
      () => false,
    );
  // Only finished runs are removed (those listed above): one removed while it starts would never
  // print, and under load a run takes longer to start than a few ticks of a schedule of seconds.
  const newestFirst = runs.sort((a, b) => String(b.CreatedAt).localeCompare(String(a.CreatedAt)));
  const removed = left
    ? newestFirst.slice(RUNS_KEPT)
    : await docker.listServices({
        filters: labelFilter({ [LABEL.service]: serviceId, [LABEL.role]: 'cron-run' }),
        ...deadline(),
      });
  for (const old of removed)
    await docker
      .getService(old.ID)
      .remove(deadline())
      .catch(() => undefined);
  // The last run of an older version may have been the last user of that version's variables.
  await sweepSecrets(docker, serviceId, Number(labels[LABEL.generation] ?? 0) + 1);
}

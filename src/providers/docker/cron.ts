/**
 * Runs cron services: a deployment leaves a created-but-never-started *template* container labelled
 * with its schedule; each tick starts a copy of it (role cron-run). The schedules are rebuilt from the
 * templates Docker holds, at start and every few seconds, so a restart or a deploy made by another
 * process is picked up. It runs in `berth serve` only, and schedules only the templates of services in
 * its own database: another Berth sharing the Docker engine keeps its own.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { LABEL, labelFilter } from './labels.ts';
import { Schedules } from './schedules.ts';

const RUNS_KEPT = 3;

export class CronScheduler {
  private readonly schedules: Schedules;
  private readonly ticking = new Set<string>();
  private readonly docker: Docker;
  private readonly logger: Logger;
  private readonly ownServices: (ids: string[]) => Promise<Set<string>>;

  constructor(docker: Docker, logger: Logger, ownServices: (ids: string[]) => Promise<Set<string>>) {
    this.docker = docker;
    this.logger = logger;
    this.ownServices = ownServices;
    this.schedules = new Schedules(
      logger,
      () => this.templates(),
      (id) => this.tick(id),
    );
  }

  async start(): Promise<void> {
    await this.schedules.start();
  }

  stop(): void {
    this.schedules.stop();
  }

  /** A no-op in processes that do not serve (berth worker): only berth serve runs schedules. */
  async rescan(): Promise<void> {
    await this.schedules.rescan();
  }

  /** The templates of this database's services, by container id, with their schedules. */
  private async templates(): Promise<Map<string, string>> {
    const templates = await this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.role]: 'cron-template' }),
    });
    const ours = await this.ownServices(templates.map((t) => t.Labels[LABEL.service] ?? ''));
    const wanted = new Map<string, string>();
    for (const template of templates) {
      const schedule = template.Labels[LABEL.cronSchedule];
      if (ours.has(template.Labels[LABEL.service] ?? '') && schedule) wanted.set(template.Id, schedule);
    }
    return wanted;
  }

  /**
   * One run: a copy of the template, started; the oldest finished runs beyond a few are removed.
   * Concurrency policy Forbid (Kubernetes' name): a tick while a run of the service is still alive is
   * skipped, so a long command never piles up runs.
   */
  private async tick(templateId: string): Promise<void> {
    const template = await this.docker.getContainer(templateId).inspect();
    const service = template.Config.Labels[LABEL.service] ?? '';
    // Two templates of one service (a rollout) tick in one process: one decides at a time.
    if (this.ticking.has(service)) return;
    this.ticking.add(service);
    try {
      const alive = await this.docker.listContainers({
        all: true,
        filters: labelFilter({ [LABEL.service]: service, [LABEL.role]: 'cron-run' }),
      });
      if (alive.some((c) => c.State !== 'exited' && c.State !== 'dead')) {
        this.logger.info({ service }, 'cron tick skipped: the previous run is still running');
        return;
      }
      await this.startRun(templateId, template);
    } finally {
      this.ticking.delete(service);
    }
  }

  private async startRun(templateId: string, template: Docker.ContainerInspectInfo): Promise<void> {
    const labels: Record<string, string> = { ...template.Config.Labels, [LABEL.role]: 'cron-run' };
    const network = template.HostConfig.NetworkMode ?? 'bridge';
    const run = await this.docker.createContainer({
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
    });
    // A delete removes the template first, then lists and removes every container of the service: a
    // run created after that listing finds its template gone here and never starts.
    const templateLeft = await this.docker
      .getContainer(templateId)
      .inspect()
      .then(
        () => true,
        () => false,
      );
    if (!templateLeft) {
      await run.remove({ force: true }).catch(() => undefined);
      return;
    }
    await run.start();
    const service = labels[LABEL.service] as string;
    const runs = await this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.service]: service, [LABEL.role]: 'cron-run' }),
    });
    const finished = runs.filter((c) => c.State === 'exited').sort((a, b) => b.Created - a.Created);
    for (const old of finished.slice(RUNS_KEPT))
      await this.docker.getContainer(old.Id).remove({ force: true });
  }
}

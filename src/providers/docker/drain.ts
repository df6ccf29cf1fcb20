import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { INGRESS_CACHE_MS } from '../engine/ingress.ts';
import { LABEL, labelFilter } from '../engine/labels.ts';
import type { DockerDb } from '../engine/tables.ts';
import type { DeployLog } from '../provider.ts';
import { removeReplica } from './sandboxes.ts';

/**
 * Retires what a promotion replaced, after the deployment has succeeded: the old version's containers
 * (and whatever an earlier service type left) are stopped gracefully, all at once, and removed. A
 * deployment's outcome never waits for this.
 *
 * Crash-safe without a record of its own: a retired container is one of a routed service that is not
 * the serving deployment's and was created before that deployment took the route (docker_routes'
 * updated_at). A newer rollout's containers are created after it, so they are never taken for retired
 * ones. `drain` is called after each promotion, at the start of each deployment and when `berth serve`
 * starts, so a drain cut short by a crash is finished by the next of these.
 */
export class Drainer {
  private readonly docker: Docker;
  private readonly db: DockerDb;
  private readonly logger: Logger;
  private readonly afterDrain: () => Promise<void>;
  /** The drain running per service; a new request queues behind it. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(options: { docker: Docker; db: DockerDb; logger: Logger; afterDrain: () => Promise<void> }) {
    this.docker = options.docker;
    this.db = options.db;
    this.logger = options.logger;
    this.afterDrain = options.afterDrain;
  }

  /** The log of the deployment that last took each service's route, for its `old_stopped` moment. */
  private readonly retiredBy = new Map<string, { deploymentId: string; log: DeployLog }>();

  /**
   * Starts draining the service's retired containers in the background. `by`: the deployment that just
   * took the route; whichever drain stops what it replaced marks its `old_stopped`.
   */
  drain(serviceId: string, by?: { deploymentId: string; log: DeployLog }): void {
    if (by) this.retiredBy.set(serviceId, by);
    const previous = this.running.get(serviceId) ?? Promise.resolve();
    const next = previous
      .then(() => this.drainNow(serviceId))
      .catch((err) => this.logger.warn({ err, service: serviceId }, 'draining retired containers failed'))
      .finally(() => {
        if (this.running.get(serviceId) === next) this.running.delete(serviceId);
      });
    this.running.set(serviceId, next);
  }

  /** Drains every routed service: what a process that stopped mid-drain left behind. */
  async drainAll(): Promise<void> {
    const routes = await this.db.selectFrom('docker_routes').select('service_id').execute();
    for (const route of routes) this.drain(route.service_id);
  }

  /** Waits for the drains in progress (a graceful shutdown), at most `ms`. */
  async settle(ms: number): Promise<void> {
    await Promise.race([Promise.all(this.running.values()), sleep(ms, undefined, { ref: false })]);
  }

  private stopped(serviceId: string, deploymentId: string): void {
    const by = this.retiredBy.get(serviceId);
    if (by?.deploymentId !== deploymentId) return;
    by.log.mark('old_stopped');
    this.retiredBy.delete(serviceId);
  }

  private async drainNow(serviceId: string): Promise<void> {
    const route = await this.db
      .selectFrom('docker_routes')
      .select(['deployment_id', 'updated_at'])
      .where('service_id', '=', serviceId)
      .executeTakeFirst();
    if (!route) return;
    // Every ingress must see the new route before the old containers go.
    const routedFor = Date.now() - route.updated_at.getTime();
    if (routedFor < INGRESS_CACHE_MS + 500) await sleep(INGRESS_CACHE_MS + 500 - routedFor);
    const listed = await this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.service]: serviceId }),
    });
    // A sandbox goes with the replica that runs in it (a spare waits for the next rollout).
    const others = listed.filter(
      (c) => c.Labels[LABEL.deployment] !== route.deployment_id && c.Labels[LABEL.role] !== 'sandbox',
    );
    const retired = await Promise.all(
      others.map(async (c) => {
        const info = await this.docker
          .getContainer(c.Id)
          .inspect()
          .catch(() => null);
        return info && new Date(info.Created).getTime() < route.updated_at.getTime() ? c : null;
      }),
    );
    const gone = retired.filter((c) => c !== null);
    if (gone.length === 0) return;
    await Promise.all(
      gone.map(async (c) => {
        // Ten seconds to finish what they are doing, as `docker stop` gives.
        await this.docker
          .getContainer(c.Id)
          .stop({ t: 10 })
          .catch(() => undefined);
        await removeReplica(this.docker, c);
      }),
    );
    this.stopped(serviceId, route.deployment_id);
    await this.afterDrain();
  }
}

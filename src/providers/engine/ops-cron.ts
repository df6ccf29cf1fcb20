/**
 * ops.json `cron.cron_jobs` of web and internal services on the Engine-API drivers: on each tick of a
 * job's schedule, an HTTP GET of its path on the service's internal address, made by the driver's
 * `request` (docker: from this process to a running replica; swarm: from a task on the environment's
 * overlay). The schedules are rebuilt from docker_routes every few seconds, as cron.ts rebuilds cron
 * services' from their templates, so a deployment made by another process is picked up. `berth serve`
 * only; every one schedules every job, and a tick is claimed first (cron-ticks.ts), so it is requested
 * once however many Berth processes there are.
 * @module
 */
import type { Logger } from 'pino';
import { REMOVED_GENERATION } from '../provider.ts';
import { claimTick, tickTime } from './cron-ticks.ts';
import { Schedules } from './schedules.ts';
import type { DockerDb } from './tables.ts';

/** A request to a job's path is abandoned after this long (the next tick tries again). */
export const REQUEST_TIMEOUT_MS = 60_000;

/** One cron job of the deployment that serves a service. */
export interface OpsCronJob {
  serviceId: string;
  deploymentId: string;
  environmentId: string;
  subdomain: string;
  port: number;
  schedule: string;
  path: string;
}

export type OpsCronRequest = (job: OpsCronJob, at: Date) => Promise<void>;

/** What names a job among a service's ticks: its schedule and path. */
export function opsJobName(job: Pick<OpsCronJob, 'schedule' | 'path'>): string {
  return `${job.schedule} ${job.path}`;
}

export class OpsCronJobs {
  private readonly schedules: Schedules;
  private readonly db: DockerDb;

  constructor(db: DockerDb, logger: Logger, request: OpsCronRequest) {
    this.db = db;
    // A job is keyed by what it does (the JSON of an OpsCronJob): a rollout or an edit is a new key.
    this.schedules = new Schedules(
      logger,
      () => this.jobs(),
      async (key, at) => {
        const job = JSON.parse(key) as OpsCronJob;
        if (await claimTick(db, job.serviceId, opsJobName(job), at)) return request(job, at);
        logger.debug(
          { service: job.serviceId, path: job.path, tick: tickTime(at).toISOString() },
          'cron tick claimed by another Berth process',
        );
      },
    );
  }

  start(): Promise<void> {
    return this.schedules.start();
  }

  stop(): void {
    this.schedules.stop();
  }

  /** Every cron job of a serving web or internal service, by key, with its schedule. */
  private async jobs(): Promise<Map<string, string>> {
    const routes = await this.db
      .selectFrom('docker_routes')
      .select(['service_id', 'deployment_id', 'environment_id', 'subdomain', 'port', 'ops'])
      .where('generation', '<', REMOVED_GENERATION)
      .where('type', 'in', ['web', 'internal'])
      .execute();
    const wanted = new Map<string, string>();
    for (const route of routes) {
      if (!route.port || !route.environment_id || !route.subdomain) continue;
      for (const { schedule, path } of route.ops.cron_jobs ?? []) {
        const job: OpsCronJob = {
          serviceId: route.service_id,
          deploymentId: route.deployment_id,
          environmentId: route.environment_id,
          subdomain: route.subdomain,
          port: route.port,
          schedule,
          path,
        };
        wanted.set(JSON.stringify(job), schedule);
      }
    }
    return wanted;
  }
}

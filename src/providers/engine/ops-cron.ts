/**
 * ops.json `cron.cron_jobs` of web and internal services on the Engine-API drivers: on each tick of a
 * job's schedule, an HTTP GET of its path on the service's internal address, made by the driver's
 * `request` (docker: from this process to a running replica; swarm: from a task on the environment's
 * overlay). The schedules are rebuilt from docker_routes every few seconds, as cron.ts rebuilds cron
 * services' from their templates, so a deployment made by another process is picked up. `berth serve`
 * only.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { REMOVED_GENERATION } from '../provider.ts';
import { LABEL, labelFilter, networkName } from './labels.ts';
import { addressOf } from './replica-address.ts';
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

export class OpsCronJobs {
  private readonly schedules: Schedules;
  private readonly db: DockerDb;

  constructor(db: DockerDb, logger: Logger, request: OpsCronRequest) {
    this.db = db;
    // A job is keyed by what it does (the JSON of an OpsCronJob): a rollout or an edit is a new key.
    this.schedules = new Schedules(
      logger,
      () => this.jobs(),
      (key, at) => request(JSON.parse(key) as OpsCronJob, at),
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

/**
 * The docker driver's request: a GET of the path on a running replica, at its address on the
 * environment's network (this process runs on the same machine). Failures are logged; the schedule
 * goes on.
 */
export function requestReplica(docker: Docker, logger: Logger): OpsCronRequest {
  return async (job) => {
    const replicas = await docker
      .listContainers({
        filters: labelFilter({ [LABEL.deployment]: job.deploymentId, [LABEL.role]: 'replica' }),
      })
      .catch(() => []);
    const replica = replicas[Math.floor(Math.random() * replicas.length)];
    const ip = replica && (await addressOf(docker, replica, networkName(job.environmentId)));
    const at = { service: job.serviceId, path: job.path };
    if (!ip) {
      logger.warn(at, 'ops.json cron job skipped: no replica is running');
      return;
    }
    try {
      const res = await fetch(`http://${ip}:${job.port}${job.path}`, {
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        redirect: 'manual',
      });
      await res.body?.cancel();
      logger.info({ ...at, status: res.status }, 'ops.json cron job requested');
    } catch (err) {
      logger.warn({ ...at, err }, 'ops.json cron job request failed');
    }
  };
}

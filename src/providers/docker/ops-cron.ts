/**
 * ops.json `cron.cron_jobs` of web and internal services: on each tick of a job's schedule, an HTTP GET
 * of its path on a running replica of the deployment that serves (the service's port on the environment
 * network). The schedules are rebuilt from docker_routes every few seconds, as cron.ts rebuilds cron
 * services' from their templates, so a deployment made by another process is picked up; a request
 * still running when the next tick comes makes that tick skip. `berth serve` only.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { REMOVED_GENERATION } from '../provider.ts';
import { LABEL, labelFilter, networkName } from './labels.ts';
import { Schedules } from './schedules.ts';
import type { DockerDb } from './tables.ts';

/** A request to a job's path is abandoned after this long (the next tick tries again). */
const REQUEST_TIMEOUT_MS = 60_000;

interface Job {
  serviceId: string;
  deploymentId: string;
  environmentId: string;
  port: number;
  path: string;
}

export class OpsCronJobs {
  private readonly schedules: Schedules;
  private readonly docker: Docker;
  private readonly db: DockerDb;
  private readonly logger: Logger;

  constructor(docker: Docker, db: DockerDb, logger: Logger) {
    this.docker = docker;
    this.db = db;
    this.logger = logger;
    // A job is keyed by what it does (the JSON of a Job): a rollout or an edit is a new key.
    this.schedules = new Schedules(
      logger,
      () => this.jobs(),
      (key) => this.request(JSON.parse(key) as Job),
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
      .select(['service_id', 'deployment_id', 'environment_id', 'port', 'ops'])
      .where('generation', '<', REMOVED_GENERATION)
      .where('type', 'in', ['web', 'internal'])
      .execute();
    const wanted = new Map<string, string>();
    for (const route of routes) {
      if (!route.port || !route.environment_id) continue;
      for (const { schedule, path } of route.ops.cron_jobs ?? []) {
        const job: Job = {
          serviceId: route.service_id,
          deploymentId: route.deployment_id,
          environmentId: route.environment_id,
          port: route.port,
          path,
        };
        wanted.set(JSON.stringify({ ...job, schedule }), schedule);
      }
    }
    return wanted;
  }

  /** One tick: GET the path on a running replica. Failures are logged; the schedule goes on. */
  private async request(job: Job): Promise<void> {
    const replicas = await this.docker
      .listContainers({
        filters: labelFilter({ [LABEL.deployment]: job.deploymentId, [LABEL.role]: 'replica' }),
      })
      .catch(() => []);
    const replica = replicas[Math.floor(Math.random() * replicas.length)];
    const ip = replica?.NetworkSettings.Networks[networkName(job.environmentId)]?.IPAddress;
    const at = { service: job.serviceId, path: job.path };
    if (!ip) {
      this.logger.warn(at, 'ops.json cron job skipped: no replica is running');
      return;
    }
    try {
      const res = await fetch(`http://${ip}:${job.port}${job.path}`, {
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        redirect: 'manual',
      });
      await res.body?.cancel();
      this.logger.info({ ...at, status: res.status }, 'ops.json cron job requested');
    } catch (err) {
      this.logger.warn({ ...at, err }, 'ops.json cron job request failed');
    }
  }
}

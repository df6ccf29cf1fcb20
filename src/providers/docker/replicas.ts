/**
 * Where the shared layer reaches the docker driver's containers: the ingress's targets, the logs'
 * sources and ops.json cron jobs' requests, each from the containers' labels on this host's Engine.
 * @module
 */
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { ENGINE_CALL_MS, engineDeadline } from '../engine/deadlines.ts';
import type { RouteTarget } from '../engine/ingress.ts';
import { LABEL, labelFilter, networkName } from '../engine/labels.ts';
import type { LogOptions, LogSource } from '../engine/logs.ts';
import { type OpsCronRequest, REQUEST_TIMEOUT_MS } from '../engine/ops-cron.ts';
import { addressOf } from './replica-address.ts';

/** What prints: replicas, job runs and cron runs (a cron template never runs). */
const PRINTING_ROLES = new Set(['replica', 'job', 'cron-run']);

/**
 * The docker driver's targets: the running replicas of the serving deployment, by their address on the
 * environment network (the ingress runs on the engine's host, which reaches bridge networks). The
 * Engine calls are abandoned after `engineMs` each (engine/deadlines.ts): HAProxy's table waits for them.
 */
export function containerTargets(
  docker: Docker,
  engineMs = ENGINE_CALL_MS,
): (route: RouteTarget) => Promise<string[]> {
  return async (route) => {
    const containers = await docker.listContainers({
      filters: labelFilter({
        [LABEL.service]: route.serviceId,
        [LABEL.deployment]: route.deploymentId,
        [LABEL.role]: 'replica',
      }),
      ...engineDeadline(engineMs),
    });
    const network = networkName(route.environmentId);
    const ips = await Promise.all(
      containers.map((c) => addressOf(docker, c, network, engineDeadline(engineMs))),
    );
    return ips.flatMap((ip) => (ip ? [`${ip}:${route.port}`] : []));
  };
}

/** The docker driver's sources: the service's containers that print. */
export function containerSources(docker: Docker): (serviceId: string) => Promise<LogSource[]> {
  return async (serviceId) => {
    const all = await docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.service]: serviceId }),
    });
    return all
      .filter((c) => PRINTING_ROLES.has(c.Labels[LABEL.role] ?? ''))
      .map((c) => ({
        id: c.Id,
        replica: (c.Names[0] ?? c.Id).replace(/^\//, ''),
        logs: ({ follow, ...options }: LogOptions) =>
          follow
            ? docker.getContainer(c.Id).logs({ ...options, follow: true })
            : docker.getContainer(c.Id).logs({ ...options, follow: false }),
      }));
  };
}

/**
 * The docker driver's request: a GET of the path on a running replica, at its address on the
 * environment's network (this process runs on the same machine). Failures are logged; the schedule
 * goes on. The Engine calls that find the replica are abandoned after `engineMs` each
 * (engine/deadlines.ts): the job's next tick waits for this one.
 */
export function requestReplica(docker: Docker, logger: Logger, engineMs = ENGINE_CALL_MS): OpsCronRequest {
  return async (job) => {
    const at = { service: job.serviceId, path: job.path };
    let ip: string | undefined;
    try {
      const replicas = await docker.listContainers({
        filters: labelFilter({ [LABEL.deployment]: job.deploymentId, [LABEL.role]: 'replica' }),
        ...engineDeadline(engineMs),
      });
      const replica = replicas[Math.floor(Math.random() * replicas.length)];
      ip =
        replica &&
        (await addressOf(docker, replica, networkName(job.environmentId), engineDeadline(engineMs)));
    } catch (err) {
      logger.warn({ ...at, err }, 'ops.json cron job skipped: the Docker Engine did not list its replicas');
      return;
    }
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

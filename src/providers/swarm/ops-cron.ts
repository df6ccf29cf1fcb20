/**
 * ops.json cron jobs on the swarm (the schedules are engine/ops-cron.ts's). Berth's process is on no
 * environment's overlay, so each tick's GET is made by a task that is: a replicated job
 * (`berth-req-...`, role cron-request) on the environment's overlay, from BERTH_SWARM_REQUEST_IMAGE, that
 * runs `wget` on `http://<kube_svc_alias>:<port><path>`, the service's internal address (the overlay's
 * DNS resolves it to the service's tasks). Every `berth serve` schedules every job; a tick is claimed in
 * the database first (engine/cron-ticks.ts), so it is requested once however many Berth processes there
 * are. A tick while the job's previous request still runs is skipped. The request's outcome is logged,
 * then its task removed.
 * @module
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { ENGINE_CALL_MS, engineDeadline } from '../engine/deadlines.ts';
import { LABEL, labelFilter } from '../engine/labels.ts';
import { type OpsCronJob, type OpsCronRequest, opsJobName, REQUEST_TIMEOUT_MS } from '../engine/ops-cron.ts';
import { serviceAlias } from '../engine/routes.ts';
import { failedTasks, jobEnded, overlayName, type Task, tasksOf } from './services.ts';

const POLL_MS = 1000;
/** How long a request's creator follows it: past its timeout, and a pull's. */
const FOLLOW_MS = 2 * REQUEST_TIMEOUT_MS;
export function requestTask(
  docker: Docker,
  image: string,
  logger: Logger,
  engineMs = ENGINE_CALL_MS,
): OpsCronRequest {
  // Each Engine call of a tick is abandoned past its deadline (engine/deadlines.ts).
  const deadline = () => engineDeadline(engineMs);
  return async (job: OpsCronJob, at: Date) => {
    const jobLabel = createHash('sha256').update(opsJobName(job)).digest('hex').slice(0, 12);
    const log = { service: job.serviceId, path: job.path };
    const labels = {
      [LABEL.managed]: 'true',
      [LABEL.environment]: job.environmentId,
      [LABEL.service]: job.serviceId,
      [LABEL.deployment]: job.deploymentId,
      [LABEL.role]: 'cron-request',
      [LABEL.cronJob]: jobLabel,
    };
    const earlier = await docker.listServices({
      filters: labelFilter({ [LABEL.service]: job.serviceId, [LABEL.cronJob]: jobLabel }),
      ...deadline(),
    });
    for (const request of earlier) {
      // One without a task yet is still starting, unless it is older than its creator follows it (that
      // process stopped, or the swarm cannot place it): removing it while it starts would lose its tick.
      const tasks = await tasksOf(docker, request.ID, deadline());
      const abandoned = tasks.length === 0 && Date.parse(String(request.CreatedAt)) <= Date.now() - FOLLOW_MS;
      if (!jobEnded(tasks) && !abandoned) {
        logger.info(log, 'ops.json cron job skipped: its previous request is still running');
        return;
      }
      // One a process stopped following (it stopped, or it crashed).
      await docker
        .getService(request.ID)
        .remove(deadline())
        .catch(() => undefined);
    }
    const url = `http://${serviceAlias(job.environmentId, job.subdomain)}:${job.port}${job.path}`;
    const name = `berth-req-${job.deploymentId.slice(0, 8)}-${jobLabel.slice(0, 8)}-${Math.floor(at.getTime() / 1000)}`;
    await docker.createService({
      Name: name,
      Labels: labels,
      TaskTemplate: {
        ContainerSpec: {
          Image: image,
          Command: ['wget', '-q', '-O', '/dev/null', '-T', String(REQUEST_TIMEOUT_MS / 1000), url],
          Labels: labels,
        },
        RestartPolicy: { Condition: 'none' },
        Networks: [{ Target: overlayName(job.environmentId) }],
      },
      Mode: { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } },
      ...deadline(),
    });
    const outcome = await follow(docker, name, deadline);
    if (outcome.ok) logger.info({ ...log, url }, 'ops.json cron job requested');
    else logger.warn({ ...log, url, error: outcome.error }, 'ops.json cron job request failed');
    await docker
      .getService(name)
      .remove(deadline())
      .catch(() => undefined);
  };
}

/** Until the request's task ends (wget exits 0 on a 2xx or 3xx), or past its timeout and a pull's. */
async function follow(
  docker: Docker,
  name: string,
  deadline: () => { abortSignal: AbortSignal },
): Promise<{ ok: boolean; error?: string }> {
  const until = Date.now() + FOLLOW_MS;
  let tasks: Task[] = [];
  while (Date.now() < until) {
    tasks = await tasksOf(docker, name, deadline()).catch(() => []);
    if (tasks.some((t) => t.Status.State === 'complete')) return { ok: true };
    const failed = failedTasks(tasks)[0];
    if (failed) {
      const code = failed.Status.ContainerStatus?.ExitCode;
      return { ok: false, error: `exit code ${code ?? 'unknown'}: ${failed.Status.Err ?? ''}` };
    }
    await sleep(POLL_MS);
  }
  return { ok: false, error: `no outcome in time (${tasks[0]?.Status.State ?? 'no task'})` };
}

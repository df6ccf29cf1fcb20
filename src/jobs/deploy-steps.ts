/**
 * The steps of the deploy job (handlers/deploy.ts), each usable and tested alone: start the run, watch
 * for a cancel, roll the desired state out, record the outcome; note a retry, fail the run.
 * @module
 */
import { redactor } from '../domain/redact.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { placeAfterCancel } from '../domain/usecases/deploy-controls.ts';
import { maskedValuesOf } from '../domain/usecases/secrets.ts';
import {
  type Applied,
  type DeployedSource,
  DeployFailed,
  DeploymentCancelled,
} from '../providers/provider.ts';
import type { Db, Store } from '../store/database.ts';
import { appendDeploymentLog } from '../store/repositories/deployment-logs.ts';
import {
  cancelRequested,
  endDeployment,
  findDeploymentById,
  noteUnfinishedDeployment,
  startDeployment,
  transitionDeployment,
} from '../store/repositories/deployments.ts';
import { followDeployment } from '../store/repositories/services.ts';
import type { DeploymentRow, JobRow } from '../store/schema.ts';
import { evaluateDeployOutcome } from './alerts.ts';
import type { DeploymentLogWriter } from './deployment-log.ts';
import { type DeploymentSubject, resolveDesiredState } from './desired-state.ts';
import { TerminalError } from './errors.ts';
import type { JobClaim } from './worker.ts';

/**
 * Moves a queued deployment to in_progress (with its service, and the log line, in one commit held by
 * the claim) or notes a rerun of one already started. False: nothing to run (cancelled meanwhile).
 */
export async function startRun(
  db: Db,
  deployment: DeploymentRow,
  job: JobRow,
  claim: JobClaim,
  log: DeploymentLogWriter,
): Promise<boolean> {
  const attempt = `attempt ${job.attempts} of ${job.max_attempts}`;
  if (deployment.state !== 'queued') {
    log.line('outcome', `Started again (${attempt})`);
    return true;
  }
  return db.transaction().execute(async (trx) => {
    const moved = await startDeployment(trx, deployment.id);
    if (moved) {
      log.end('queue', 'success', `Started (${attempt})`);
      await log.writeIn(trx);
    }
    // An attempt that lost the job before this commits starts nothing: the one holding the job finds
    // the deployment queued and starts it, instead of finding it started and ending the job. Held last:
    // a worker paused before this leaves the job free for another to take over.
    await claim.hold(trx);
    return moved;
  });
}

/**
 * A wait for a cancel ends this often even when nothing was heard: a belt to the notification's braces
 * (while notifications cannot be seen, waits end every second anyway).
 */
const CANCEL_RECHECK_MS = 30_000;

/**
 * The reason a cancel watch's own signal aborts with when it ends (nobody reads it): without one,
 * abort() builds a DOMException with its stack, once per deployment.
 */
const WATCH_ENDED = new Error('the cancel watch ended');

/**
 * A cancel is a flag on the row, announced on `cancels` when it commits: read now (by `firstLook`,
 * when the caller's own read carries the flag), and again each time one for this deployment is heard,
 * it aborts `signal` (the driver checks it before each side effect, so traffic does not move). No timer
 * polls the row meanwhile.
 */
export async function watchForCancel(
  store: Pick<Store, 'db' | 'notifications'>,
  deploymentId: string,
  firstLook: () => Promise<boolean> = () => cancelRequested(store.db, deploymentId),
): Promise<CancelWatch> {
  const cancel = new AbortController();
  const stopped = new AbortController();
  const until = AbortSignal.any([cancel.signal, stopped.signal]);
  const seen = (requested: boolean) => {
    if (requested) cancel.abort(new DeploymentCancelled());
  };
  const look = async () => seen(await cancelRequested(store.db, deploymentId));
  // Armed before each read: a cancel committed between the read and the wait still wakes it.
  const arm = () => store.notifications.arm([['cancels', deploymentId]], CANCEL_RECHECK_MS, until);
  let armed = await arm();
  try {
    seen(await firstLook());
  } catch (error) {
    stopped.abort(WATCH_ENDED);
    throw error;
  }
  void (async () => {
    while (!until.aborted) {
      await armed.woken;
      if (until.aborted) return;
      armed = await arm();
      await look().catch(() => undefined);
    }
  })();
  return { signal: cancel.signal, stop: () => stopped.abort(WATCH_ENDED) };
}

/** A watch for a deployment's cancel (watchForCancel): `signal` aborts on it; `stop` ends the watch. */
export interface CancelWatch {
  signal: AbortSignal;
  stop(): void;
}

/** How a rollout ended: applied, or failed (cancelled included) with the reason to record. */
export type RolloutOutcome = { applied: Applied } | { failure: string; source?: DeployedSource };

/**
 * Resolves the deployment's desired state and applies it. A TerminalError (or a cancel) is a failed
 * outcome; any other error is thrown (the job retries), unless the job was lost meanwhile (`lost`
 * aborted): then undefined, and the outcome is the new holder's to record. `watch`: the caller's
 * cancel watch (the deploy job's, armed before its read); without one the rollout watches alone.
 */
export async function rollOut(
  deps: Deps,
  subject: DeploymentSubject,
  lost: AbortSignal,
  log: DeploymentLogWriter,
  watch?: CancelWatch,
): Promise<RolloutOutcome | undefined> {
  const cancel = watch ?? (await watchForCancel(deps.store, subject.deployment.id));
  try {
    const signal = AbortSignal.any([lost, cancel.signal]);
    const mask = (values: Iterable<string>) => log.maskValues(values);
    const desired = await resolveDesiredState(deps, subject, { signal, log, mask, run: true });
    return { applied: await deps.provider.apply(desired, signal, log) };
  } catch (error) {
    await log.flush();
    if (lost.aborted) return undefined;
    if (cancel.signal.aborted) return { failure: 'cancelled' };
    if (!(error instanceof TerminalError)) throw error;
    return {
      failure: log.masked(error.message),
      ...(error instanceof DeployFailed ? { source: error.source } : {}),
    };
  } finally {
    if (!watch) cancel.stop();
  }
}

/**
 * What the provider resolved, except that a commit's author and message the git host's event recorded
 * (a push) stay when the provider ran that same commit: the host knows them, a simulated cloud does not.
 */
export function keepHostDetails(
  deployment: Pick<DeploymentRow, 'git_commit_author' | 'git_commit_ref'>,
  source: DeployedSource | undefined,
): DeployedSource {
  if (!source || !deployment.git_commit_author || source.git_commit_ref !== deployment.git_commit_ref)
    return source ?? {};
  const { git_commit_author: _author, git_commit_message: _message, ...rest } = source;
  return rest;
}

/**
 * Records the outcome in one commit that ends the job (held by the claim): the deployment's final
 * state, its service following it, the log's last lines and what now runs (observed just before); then
 * counts the deployment's end in the metrics.
 */
export async function recordOutcome(
  deps: Deps,
  subject: DeploymentSubject,
  outcome: RolloutOutcome,
  log: DeploymentLogWriter,
  claim: JobClaim,
): Promise<void> {
  const { deployment, service } = subject;
  const observedAt = new Date();
  const observed = await deps.provider.observe(service);
  const ended = await deps.store.db.transaction().execute(async (trx) => {
    // One statement ends the job (fenced by the claim), the deployment, its service and the observation.
    const end =
      'applied' in outcome
        ? {
            to: 'success' as const,
            set: {
              prov_deployment_id: outcome.applied.provDeploymentId,
              failure_reason: '',
              ...keepHostDetails(deployment, outcome.applied.source),
            },
            serviceState: 'running' as const,
            provisioned: {
              namespace_name: outcome.applied.namespaceName,
              kube_svc_alias: outcome.applied.svcAlias,
            },
          }
        : {
            to: 'failed' as const,
            set: { failure_reason: outcome.failure.slice(0, 2000), ...outcome.source },
            // A cancel is no failure: the service goes back to the version that still serves, in this statement.
            ...(outcome.failure === 'cancelled'
              ? await placeAfterCancel(trx, service.id, deployment.id)
              : { serviceState: 'deploy_failed' as const }),
          };
    const { held, moved, alerted } = await endDeployment(trx, deployment, claim.fence, {
      ...end,
      observed,
      observedAt,
    });
    if (claim.fence) claim.settled(held, true);
    if (moved) {
      if ('applied' in outcome) {
        log.end('outcome', 'success', 'Deployment succeeded');
        log.mark('success');
      } else {
        const { failure } = outcome;
        log.end(
          'outcome',
          'failed',
          failure === 'cancelled' ? 'Deployment cancelled' : `Deployment failed: ${failure}`,
        );
        log.mark('failed');
      }
    }
    await log.writeIn(trx);
    if (!claim.fence) await claim.finish(trx);
    return moved ? { alerted } : undefined;
  });
  if (ended) {
    const state = 'applied' in outcome ? 'success' : outcome.failure === 'cancelled' ? 'cancelled' : 'failed';
    deps.metrics.deploymentEnded(state, deployment.created_at);
    await evaluateDeployOutcome(deps, service.id, state === 'success', ended.alerted);
  }
}

/** A retried attempt: its masked reason shows on the deployment (`failure_reason`) and in its log meanwhile. */
export async function noteRetry(deps: Pick<Deps, 'store' | 'secretBox'>, job: JobRow, reason: string) {
  const { db } = deps.store;
  const deployment = await findDeploymentById(db, job.subject_id);
  const mask = redactor(deployment ? await maskedValuesOf(db, deps.secretBox, deployment) : []);
  const note = mask(`Attempt ${job.attempts} of ${job.max_attempts} failed, retrying: ${reason}`).slice(
    0,
    2000,
  );
  await noteUnfinishedDeployment(db, job.subject_id, note);
  await db
    .transaction()
    .execute((trx) =>
      appendDeploymentLog(trx, job.subject_id, [{ step: 'outcome', line: note, at: new Date() }]),
    );
}

/**
 * The job gave up (a terminal error, or attempts spent): the deployment fails with the masked reason,
 * in the commit that ends the job. A worker that lost the job fails nothing: the deployment is the
 * holder's to finish.
 */
export async function failRun(
  deps: Pick<Deps, 'store' | 'secretBox' | 'metrics' | 'logger'>,
  job: JobRow,
  reason: string,
  claim: JobClaim,
): Promise<void> {
  const ended = await deps.store.db.transaction().execute(async (trx) => {
    const deployment = await findDeploymentById(trx, job.subject_id);
    if (!deployment) return undefined;
    const mask = redactor(await maskedValuesOf(trx, deps.secretBox, deployment));
    // A permanent error fails on its first attempt: only a retried one "kept failing".
    const failure = mask(
      job.attempts >= job.max_attempts ? `The provider kept failing: ${reason}` : reason,
    ).slice(0, 2000);
    const moved = await transitionDeployment(trx, deployment.id, ['queued', 'in_progress'], 'failed', {
      failure_reason: failure,
    });
    if (moved) {
      await followDeployment(trx, deployment.service_id, deployment.id, 'deploy_failed');
      const at = new Date();
      await appendDeploymentLog(
        trx,
        deployment.id,
        [{ step: 'outcome', line: `Deployment failed: ${failure}`, at }],
        [{ step: 'outcome', state: 'failed', startedAt: at, finishedAt: at }],
        [{ mark: 'failed', at }],
      );
    }
    await claim.finish(trx);
    return moved ? deployment : undefined;
  });
  if (ended) {
    deps.metrics.deploymentEnded('failed', ended.created_at);
    await evaluateDeployOutcome(deps, ended.service_id, false);
  }
}

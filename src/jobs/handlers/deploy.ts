import { redactor } from '../../domain/redact.ts';
import { isGitSource } from '../../domain/service-fields.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { maskedValuesOf } from '../../domain/usecases/secrets.ts';
import {
  type Applied,
  type DeployedSource,
  DeployFailed,
  DeploymentCancelled,
} from '../../providers/provider.ts';
import { appendDeploymentLog } from '../../store/repositories/deployment-logs.ts';
import {
  cancelRequested,
  findDeploymentById,
  findDeploymentToRun,
  noteUnfinishedDeployment,
  recordSnapshot,
  startDeployment,
  transitionDeployment,
} from '../../store/repositories/deployments.ts';
import { recordObservation } from '../../store/repositories/observations.ts';
import { followDeployment, recordRepoOps } from '../../store/repositories/services.ts';
import type { DeploymentRow, JobRow } from '../../store/schema.ts';
import { DeploymentLogWriter } from '../deployment-log.ts';
import { desiredStateOf } from '../desired-state.ts';
import { TerminalError } from '../errors.ts';
import { gitAccessOf } from '../git-access.ts';
import { readRepoOps } from '../repo-ops.ts';
import { provisionDependencies } from '../resources.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Carries one deployment out: builds the service's desired state and applies it. Re-entrant: it re-reads
 * the deployment, skips one already terminal, and the provider reports a generation it already applied
 * instead of rolling it out again. A TerminalError from the provider fails the deployment with its
 * message; any other error is retried. What runs afterwards is observed and written back.
 */
/**
 * What the provider resolved, except that a commit's author and message the git host's event recorded
 * (a push) stay when the provider ran that same commit: the host knows them, a simulated cloud does not.
 */
function keepHostDetails(deployment: DeploymentRow, source: DeployedSource | undefined): DeployedSource {
  if (!source || !deployment.git_commit_author || source.git_commit_ref !== deployment.git_commit_ref)
    return source ?? {};
  const { git_commit_author: _author, git_commit_message: _message, ...rest } = source;
  return rest;
}

/** How often a running deployment looks for a cancel. */
const CANCEL_POLL_MS = 300;

export function deployHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const maskOf = async (deploymentId: string): Promise<(text: string) => string> => {
    const deployment = await findDeploymentById(db, deploymentId);
    return redactor(deployment ? await maskedValuesOf(db, deps.secretBox, deployment) : []);
  };
  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const found = await findDeploymentToRun(db, job.subject_id);
      if (!found) return;
      const { deployment, service, environment } = found;
      if (deployment.state === 'success' || deployment.state === 'failed') return;
      const log = new DeploymentLogWriter(db, deployment.id, deps.logger);
      log.mark('claimed');
      const attempt = `attempt ${job.attempts} of ${job.max_attempts}`;
      if (deployment.state === 'queued') {
        const started = await db.transaction().execute(async (trx) => {
          // The deployment and its service move in one statement; the log line commits with them.
          const moved = await startDeployment(trx, deployment.id);
          if (moved) {
            log.end('queue', 'success', `Started (${attempt})`);
            await log.writeIn(trx);
          }
          // An attempt that lost the job before this commits starts nothing: the one holding the job
          // finds the deployment queued and starts it, instead of finding it started and ending the job.
          await claim.hold(trx);
          return moved;
        });
        // Cancelled in the meantime (a delete): nothing to roll out. Only a holder of the job starts it.
        if (!started) return;
      } else {
        log.line('outcome', `Started again (${attempt})`);
      }
      const desired = await desiredStateOf(deps, { deployment, service, environment });
      // A plain deploy runs with the secrets it just read; one that runs recorded values (a rollback
      // or restart) masks today's secrets as well.
      log.maskValues(
        deployment.variables_sealed
          ? await maskedValuesOf(db, deps.secretBox, deployment)
          : Object.values(desired.variables),
      );
      let applied: Applied | undefined;
      let failure: string | undefined;
      let failedSource: DeployedSource | undefined;
      // A cancel is a flag on the row: looked at while the provider works, it aborts the rollout before
      // traffic moves (the driver checks the signal before each side effect).
      const cancel = new AbortController();
      const watch = setInterval(() => {
        cancelRequested(db, deployment.id)
          .then((asked) => asked && cancel.abort(new DeploymentCancelled()))
          .catch(() => undefined);
      }, CANCEL_POLL_MS);
      try {
        if (await cancelRequested(db, deployment.id)) cancel.abort(new DeploymentCancelled());
        const stop = AbortSignal.any([signal, cancel.signal]);
        // The new version starts only once its resources exist, with their exports resolved.
        desired.git = await gitAccessOf(deps, service);
        // The git credential never reaches the log, whatever a driver or git might echo (reading the
        // repository's ops.json below clones it already).
        if (desired.git) log.maskValues([desired.git.password]);
        // A repository's ops.json is read once, at the commit then built: a rerun finds both recorded.
        const read = deployment.ops_snapshot
          ? undefined
          : await readRepoOps(deps.provider, desired, stop, log);
        if (read) {
          desired.ops = read.ops;
          desired.target.commit_id = read.commit;
        }
        const opsSnapshot = JSON.stringify(desired.ops);
        await recordSnapshot(db, deployment.id, {
          ops_snapshot: opsSnapshot,
          variables_sealed: deps.secretBox.seal(JSON.stringify(desired.variables)),
          ...(read ? { git_commit_ref: read.commit } : {}),
        });
        if (isGitSource(service.source)) await recordRepoOps(db, service.id, opsSnapshot);
        const exported = await provisionDependencies(
          deps,
          { service, environment, ops: desired.ops },
          stop,
          log,
        );
        log.maskValues(exported.passwords);
        desired.variables = { ...exported.variables, ...desired.variables };
        applied = await deps.provider.apply(desired, stop, log);
      } catch (error) {
        await log.flush();
        // Another worker may hold the job now: its run records the outcome, not this one.
        if (signal.aborted) return;
        if (cancel.signal.aborted) failure = 'cancelled';
        else if (!(error instanceof TerminalError)) throw error;
        else {
          failure = log.masked(error.message);
          if (error instanceof DeployFailed) failedSource = error.source;
        }
      } finally {
        clearInterval(watch);
      }
      if (signal.aborted) {
        await log.flush();
        return;
      }
      const observedAt = new Date();
      const observed = await deps.provider.observe(service);
      const outcome = applied ? 'success' : failure === 'cancelled' ? 'cancelled' : 'failed';
      const ended = await db.transaction().execute(async (trx) => {
        let moved: boolean;
        if (applied) {
          moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'success', {
            prov_deployment_id: applied.provDeploymentId,
            failure_reason: '',
            ...keepHostDetails(deployment, applied.source),
          });
          if (moved) {
            await followDeployment(trx, service.id, deployment.id, 'running', {
              namespace_name: applied.namespaceName,
              kube_svc_alias: applied.svcAlias,
            });
            log.end('outcome', 'success', 'Deployment succeeded');
            log.mark('success');
          }
        } else {
          moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'failed', {
            failure_reason: (failure ?? '').slice(0, 2000),
            ...failedSource,
          });
          if (moved) {
            await followDeployment(trx, service.id, deployment.id, 'deploy_failed');
            log.end(
              'outcome',
              'failed',
              failure === 'cancelled' ? 'Deployment cancelled' : `Deployment failed: ${failure ?? ''}`,
            );
            log.mark('failed');
          }
        }
        await log.writeIn(trx);
        await recordObservation(trx, service.id, observed, observedAt);
        await claim.finish(trx);
        return moved;
      });
      if (ended) deps.metrics.deploymentEnded(outcome, deployment.created_at);
    },
    async retrying(job: JobRow, reason: string) {
      const mask = await maskOf(job.subject_id);
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
    },
    async fail(job: JobRow, reason: string, claim) {
      const ended = await db.transaction().execute(async (trx) => {
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
        // A worker that lost the job fails nothing: the deployment is the holder's to finish.
        await claim.finish(trx);
        return moved ? deployment : undefined;
      });
      if (ended) deps.metrics.deploymentEnded('failed', ended.created_at);
    },
  };
}

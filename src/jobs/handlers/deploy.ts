import type { Deps } from '../../domain/usecases/context.ts';
import { type Applied, type DeployedSource, DeployFailed } from '../../providers/provider.ts';
import {
  findDeploymentById,
  findDeploymentToRun,
  noteUnfinishedDeployment,
  startDeployment,
  transitionDeployment,
} from '../../store/repositories/deployments.ts';
import { recordObservation } from '../../store/repositories/observations.ts';
import { followDeployment } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import { desiredStateOf } from '../desired-state.ts';
import { TerminalError } from '../errors.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Carries one deployment out: builds the service's desired state and applies it. Re-entrant: it re-reads
 * the deployment, skips one already terminal, and the provider reports a generation it already applied
 * instead of rolling it out again. A TerminalError from the provider fails the deployment with its
 * message; any other error is retried. What runs afterwards is observed and written back.
 */
export function deployHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal: AbortSignal, finish) {
      const found = await findDeploymentToRun(db, job.subject_id);
      if (!found) return;
      const { deployment, service, environment } = found;
      if (deployment.state === 'success' || deployment.state === 'failed') return;
      // Cancelled in the meantime (a delete): nothing to roll out.
      if (deployment.state === 'queued' && !(await startDeployment(db, deployment.id))) return;
      const desired = await desiredStateOf(deps, { deployment, service, environment });
      let applied: Applied | undefined;
      let failure: string | undefined;
      let failedSource: DeployedSource | undefined;
      try {
        applied = await deps.provider.apply(desired, signal);
      } catch (error) {
        // Another worker may hold the job now: its run records the outcome, not this one.
        if (signal.aborted) return;
        if (!(error instanceof TerminalError)) throw error;
        failure = error.message;
        if (error instanceof DeployFailed) failedSource = error.source;
      }
      if (signal.aborted) return;
      const observedAt = new Date();
      const observed = await deps.provider.observe(service);
      await db.transaction().execute(async (trx) => {
        if (applied) {
          const moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'success', {
            prov_deployment_id: applied.provDeploymentId,
            failure_reason: '',
            ...applied.source,
          });
          if (moved) {
            await followDeployment(trx, service.id, deployment.id, 'running', {
              namespace_name: applied.namespaceName,
              kube_svc_alias: applied.svcAlias,
            });
          }
        } else {
          const moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'failed', {
            failure_reason: (failure ?? '').slice(0, 2000),
            ...failedSource,
          });
          if (moved) await followDeployment(trx, service.id, deployment.id, 'deploy_failed');
        }
        await recordObservation(trx, service.id, observed, observedAt);
        await finish?.(trx);
      });
    },
    async retrying(job: JobRow, reason: string) {
      await noteUnfinishedDeployment(
        db,
        job.subject_id,
        `Attempt ${job.attempts} of ${job.max_attempts} failed, retrying: ${reason}`.slice(0, 2000),
      );
    },
    async fail(job: JobRow, reason: string) {
      await db.transaction().execute(async (trx) => {
        const deployment = await findDeploymentById(trx, job.subject_id);
        if (!deployment) return;
        const moved = await transitionDeployment(trx, deployment.id, ['queued', 'in_progress'], 'failed', {
          // A permanent error fails on its first attempt: only a retried one "kept failing".
          failure_reason: (job.attempts >= job.max_attempts
            ? `The provider kept failing: ${reason}`
            : reason
          ).slice(0, 2000),
        });
        if (moved) await followDeployment(trx, deployment.service_id, deployment.id, 'deploy_failed');
      });
    },
  };
}

import { opsConfigOf } from '../../domain/ops-json.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { effectiveSecrets } from '../../domain/usecases/secrets.ts';
import {
  findDeploymentById,
  noteUnfinishedDeployment,
  transitionDeployment,
} from '../../store/repositories/deployments.ts';
import { findEnvironmentById } from '../../store/repositories/environments.ts';
import { findServiceById, followDeployment } from '../../store/repositories/services.ts';
import type { EnvironmentRow, JobRow, ServiceRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Carries one deployment out. Re-entrant: it re-reads the deployment, skips one already terminal, and
 * the provider reports a deployment it already finished instead of running it again.
 */
export function deployHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal: AbortSignal) {
      const deployment = await findDeploymentById(db, job.subject_id);
      if (!deployment || deployment.state === 'success' || deployment.state === 'failed') return;
      const service = (await findServiceById(db, deployment.service_id)) as ServiceRow;
      const environment = (await findEnvironmentById(db, deployment.environment_id)) as EnvironmentRow;
      if (deployment.state === 'queued') {
        const started = await db.transaction().execute(async (trx) => {
          const moved = await transitionDeployment(trx, deployment.id, ['queued'], 'in_progress');
          if (moved) await followDeployment(trx, service.id, deployment.id, 'deploying');
          return moved;
        });
        // Cancelled in the meantime (a delete): nothing to roll out.
        if (!started) return;
      }
      const result = await deps.provider.deploy({
        deploymentId: deployment.id,
        service,
        environment,
        target: {
          commit_id: deployment.git_commit_ref,
          docker_image_tag: deployment.docker_image_tag,
          helm_chart_version: deployment.helm_chart_version,
        },
        ops: opsConfigOf(service),
        variables: await effectiveSecrets(db, deps.secretBox, environment.id, service.id),
        signal,
      });
      // Another worker holds the job now: its run records the outcome, not this one.
      if (signal.aborted) return;
      await db.transaction().execute(async (trx) => {
        if (result.ok) {
          const moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'success', {
            prov_deployment_id: result.provDeploymentId,
            failure_reason: '',
            ...result.source,
          });
          if (moved) {
            await followDeployment(trx, service.id, deployment.id, 'running', {
              namespace_name: result.namespaceName,
              kube_svc_alias: result.svcAlias,
            });
          }
        } else {
          const moved = await transitionDeployment(trx, deployment.id, ['in_progress'], 'failed', {
            prov_deployment_id: result.provDeploymentId,
            failure_reason: result.reason,
            ...result.source,
          });
          if (moved) await followDeployment(trx, service.id, deployment.id, 'deploy_failed');
        }
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

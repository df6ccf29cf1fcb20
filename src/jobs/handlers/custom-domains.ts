import type { Deps } from '../../domain/usecases/context.ts';
import { SILENT_LOG } from '../../providers/provider.ts';
import { deleteCertificate } from '../../store/repositories/certificates.ts';
import { findCustomDomainById, transitionCustomDomain } from '../../store/repositories/custom-domains.ts';
import { newestSuccessfulDeployment } from '../../store/repositories/deployments.ts';
import { findEnvironmentById } from '../../store/repositories/environments.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import { findServiceById, updateService } from '../../store/repositories/services.ts';
import type { EnvironmentRow, JobRow, ServiceRow } from '../../store/schema.ts';
import { resolveDesiredState } from '../desired-state.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Applies the service's current desired state again (its newest successful deployment's, resolved as
 * its deploy job resolves it; the same generation: no rollout) with the domains it is now served under. A service that never ran has
 * nothing to route: its next deployment carries the domains.
 */
async function reapply(deps: Deps, service: ServiceRow, signal: AbortSignal, adding: string[] = []) {
  if (service.is_deleted) return;
  const deployment = await newestSuccessfulDeployment(deps.store.db, service.id);
  if (!deployment) return;
  const environment = (await findEnvironmentById(deps.store.db, service.environment_id)) as EnvironmentRow;
  const desired = await resolveDesiredState(
    deps,
    { deployment, service, environment, domains: adding },
    { signal, log: SILENT_LOG },
  );
  await deps.provider.apply(desired, signal);
}

/**
 * The cut-over: verified -> deploy_queued -> deploying -> deployed (or deploy_failed). Once deployed the
 * domain is the service's active one, and the domain it replaces is retired by a job of its own.
 */
export function deployCustomDomainHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const domain = await findCustomDomainById(db, job.subject_id);
      if (!domain || !['verified', 'deploy_queued', 'deploying'].includes(domain.state)) return;
      await transitionCustomDomain(db, domain.id, ['verified'], 'deploy_queued');
      await transitionCustomDomain(db, domain.id, ['deploy_queued'], 'deploying');
      const service = (await findServiceById(db, domain.service_id)) as ServiceRow;
      await reapply(deps, service, signal, [domain.domain]);
      await db.transaction().execute(async (trx) => {
        const locked = (await findServiceById(trx, service.id, { forUpdate: true })) as ServiceRow;
        const moved = await transitionCustomDomain(trx, domain.id, ['deploying'], 'deployed');
        const previous = locked.custom_domain_id;
        if (moved) await updateService(trx, service.id, { custom_domain_id: domain.id });
        if (moved && previous && previous !== domain.id) {
          if (await transitionCustomDomain(trx, previous, ['deployed'], 'delete_queued')) {
            await enqueue(trx, {
              kind: 'retire_custom_domain',
              subjectId: previous,
              accountId: service.account_id,
              queueKey: service.id,
            });
          }
        }
        await claim.finish(trx);
      });
    },
    async fail(job: JobRow, reason: string, claim) {
      await db.transaction().execute(async (trx) => {
        await transitionCustomDomain(
          trx,
          job.subject_id,
          ['verified', 'deploy_queued', 'deploying'],
          'deploy_failed',
          { failure_reason: reason.slice(0, 2000) },
        );
        await claim.finish(trx);
      });
    },
  };
}

/** A replaced domain: delete_queued -> deleting -> deleted (or delete_failed). */
export function retireCustomDomainHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const domain = await findCustomDomainById(db, job.subject_id);
      if (!domain || !['delete_queued', 'deleting'].includes(domain.state)) return;
      await transitionCustomDomain(db, domain.id, ['delete_queued'], 'deleting');
      const service = (await findServiceById(db, domain.service_id)) as ServiceRow;
      // The domain is `deleting` now: the desired state no longer lists it.
      await reapply(deps, service, signal);
      await db.transaction().execute(async (trx) => {
        // The ingress no longer routes the name: its certificate is served no more.
        await deleteCertificate(trx, domain.id);
        await transitionCustomDomain(trx, domain.id, ['deleting'], 'deleted');
        await claim.finish(trx);
      });
    },
    async fail(job: JobRow, reason: string, claim) {
      await db.transaction().execute(async (trx) => {
        await transitionCustomDomain(trx, job.subject_id, ['delete_queued', 'deleting'], 'delete_failed', {
          failure_reason: reason.slice(0, 2000),
        });
        await claim.finish(trx);
      });
    },
  };
}

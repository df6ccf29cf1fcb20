import type { Deps } from '../../domain/usecases/context.ts';
import { findCustomDomainById, transitionCustomDomain } from '../../store/repositories/custom-domains.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import { findServiceById, updateService } from '../../store/repositories/services.ts';
import type { JobRow, ServiceRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

/**
 * The cut-over: verified -> deploy_queued -> deploying -> deployed (or deploy_failed). Once deployed the
 * domain is the service's active one, and the domain it replaces is retired by a job of its own.
 */
export function deployCustomDomainHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      const domain = await findCustomDomainById(db, job.subject_id);
      if (!domain || !['verified', 'deploy_queued', 'deploying'].includes(domain.state)) return;
      await transitionCustomDomain(db, domain.id, ['verified'], 'deploy_queued');
      await transitionCustomDomain(db, domain.id, ['deploy_queued'], 'deploying');
      const service = (await findServiceById(db, domain.service_id)) as ServiceRow;
      const { provCustomDomainId } = await deps.provider.attachDomain(service, domain);
      await db.transaction().execute(async (trx) => {
        const locked = (await findServiceById(trx, service.id, { forUpdate: true })) as ServiceRow;
        const moved = await transitionCustomDomain(trx, domain.id, ['deploying'], 'deployed', {
          prov_custom_domain_id: provCustomDomainId,
        });
        if (!moved) return;
        const previous = locked.custom_domain_id;
        await updateService(trx, service.id, { custom_domain_id: domain.id });
        if (previous && previous !== domain.id) {
          if (await transitionCustomDomain(trx, previous, ['deployed'], 'delete_queued')) {
            await enqueue(trx, { kind: 'retire_custom_domain', subjectId: previous, queueKey: service.id });
          }
        }
      });
    },
    async fail(job: JobRow, reason: string) {
      await transitionCustomDomain(
        db,
        job.subject_id,
        ['verified', 'deploy_queued', 'deploying'],
        'deploy_failed',
        {
          failure_reason: reason.slice(0, 2000),
        },
      );
    },
  };
}

/** A replaced domain: delete_queued -> deleting -> deleted (or delete_failed). */
export function retireCustomDomainHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      const domain = await findCustomDomainById(db, job.subject_id);
      if (!domain || !['delete_queued', 'deleting'].includes(domain.state)) return;
      await transitionCustomDomain(db, domain.id, ['delete_queued'], 'deleting');
      const service = (await findServiceById(db, domain.service_id)) as ServiceRow;
      await deps.provider.detachDomain(service, domain);
      await transitionCustomDomain(db, domain.id, ['deleting'], 'deleted');
    },
    async fail(job: JobRow, reason: string) {
      await transitionCustomDomain(db, job.subject_id, ['delete_queued', 'deleting'], 'delete_failed', {
        failure_reason: reason.slice(0, 2000),
      });
    },
  };
}

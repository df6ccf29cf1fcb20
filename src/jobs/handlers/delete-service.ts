import type { Deps } from '../../domain/usecases/context.ts';
import { retireAllDomains } from '../../store/repositories/custom-domains.ts';
import { recordObservation } from '../../store/repositories/observations.ts';
import { findServiceById, transitionService } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import { removeDependencies } from '../resources.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Tears a service down: delete_pending -> delete_queued -> deleting -> deleted (or delete_failed).
 * Every move is guarded by the states it may come from, so a job that runs again after a crash picks
 * up where it stopped, and one whose service is in no delete state removes nothing.
 */
export function deleteServiceHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, _signal, claim) {
      const service = await findServiceById(db, job.subject_id);
      if (!service) return;
      await transitionService(db, service.id, ['delete_pending'], 'delete_queued');
      const deleting = await transitionService(db, service.id, ['delete_queued', 'deleting'], 'deleting');
      if (!deleting) return;
      await removeDependencies(deps, service);
      await deps.provider.remove(service);
      await db.transaction().execute(async (trx) => {
        if (await transitionService(trx, service.id, ['deleting'], 'deleted', { is_deleted: true })) {
          await recordObservation(trx, service.id, { run_status: 'deleted', ready_count: 0 });
          // The teardown took the service's routes with it; its domain names are free to register again.
          await retireAllDomains(trx, service.id);
        }
        await claim.finish(trx);
      });
    },
    async fail(job: JobRow, _reason, claim) {
      await db.transaction().execute(async (trx) => {
        await transitionService(
          trx,
          job.subject_id,
          ['delete_pending', 'delete_queued', 'deleting'],
          'delete_failed',
        );
        await claim.finish(trx);
      });
    },
  };
}

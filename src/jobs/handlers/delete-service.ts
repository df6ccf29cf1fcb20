import type { Deps } from '../../domain/usecases/context.ts';
import { retireAllDomains } from '../../store/repositories/custom-domains.ts';
import { recordObservation } from '../../store/repositories/observations.ts';
import { findServiceById, updateService } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

/** Tears a service down: delete_pending -> delete_queued -> deleting -> deleted (or delete_failed). */
export function deleteServiceHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      const service = await findServiceById(db, job.subject_id);
      if (!service || service.state === 'deleted') return;
      if (service.state === 'delete_pending') await updateService(db, service.id, { state: 'delete_queued' });
      await updateService(db, service.id, { state: 'deleting' });
      await deps.provider.remove(service);
      await db.transaction().execute(async (trx) => {
        await updateService(trx, service.id, { state: 'deleted', is_deleted: true });
        await recordObservation(trx, service.id, { run_status: 'deleted', ready_count: 0 });
        // The teardown took the service's routes with it; its domain names are free to register again.
        await retireAllDomains(trx, service.id);
      });
    },
    async fail(job: JobRow) {
      await updateService(db, job.subject_id, { state: 'delete_failed' });
    },
  };
}

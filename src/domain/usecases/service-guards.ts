/**
 * The guards every mutation of a service passes: its row locked for the transaction, and no change
 * once a delete was accepted (403).
 * @module
 */
import type { Db } from '../../store/database.ts';
import { findServiceById, transitionService } from '../../store/repositories/services.ts';
import type { ServiceRow, ServiceUpdate } from '../../store/schema.ts';
import { ForbiddenError } from '../errors.ts';
import { isDeleting, LIVE_STATES, type ServiceState } from '../service-states.ts';

/** Every mutation of a service in a delete state is refused with 403. */
export function assertNotDeleting(service: ServiceRow): void {
  if (isDeleting(service.state)) throw new ForbiddenError('Service is being deleted');
}

/** Locks the service's row for the transaction and returns it as it now stands. */
export async function lockService(trx: Db, serviceId: string): Promise<ServiceRow> {
  const locked = await findServiceById(trx, serviceId, { forUpdate: true });
  if (!locked) throw new Error(`service ${serviceId} vanished`);
  return locked;
}

/** Locks the service's row for the transaction and refuses when a delete was accepted meanwhile. */
export async function lockLiveService(trx: Db, serviceId: string): Promise<ServiceRow> {
  const locked = await lockService(trx, serviceId);
  assertNotDeleting(locked);
  return locked;
}

/** Moves a service that no delete has reached to `to`; a delete under way refuses (403), nothing written. */
export async function moveLiveService(
  trx: Db,
  serviceId: string,
  to: ServiceState,
  extra: Omit<ServiceUpdate, 'state'> = {},
): Promise<void> {
  if (!(await transitionService(trx, serviceId, LIVE_STATES, to, extra)))
    throw new ForbiddenError('Service is being deleted');
}

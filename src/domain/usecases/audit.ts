import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { insertAuditLog } from '../../store/repositories/audit.ts';
import { confirmKey } from '../../store/repositories/idempotency-keys.ts';
import { ConflictError } from '../errors.ts';
import type { Actor } from './context.ts';

export interface AuditEvent {
  action: string;
  resourceType: string;
  resourceId: string | null;
  environmentId: string | null;
}

/**
 * Writes the audit entry of a mutation. Call it with the mutation's transaction. Never pass secret values.
 * Every mutation writes its one entry here, so this is also where a request's Idempotency-Key is marked
 * done: the key and the work commit together, and work is never done without its key saying so.
 */
export async function recordAudit(db: Db, actor: Actor, event: AuditEvent): Promise<void> {
  if (actor.idempotency && !(await confirmKey(db, actor.idempotency))) {
    throw new ConflictError(
      'This request held its Idempotency-Key so long that a retry took the key over; nothing was done here',
    );
  }
  await insertAuditLog(db, {
    id: randomUUID(),
    account_id: actor.accountId,
    actor: actor.tokenId ? 'API Token' : 'Operator',
    token_id: actor.tokenId,
    action: event.action,
    resource_type: event.resourceType,
    resource_id: event.resourceId,
    environment_id: event.environmentId,
    request_id: actor.requestId,
  });
}

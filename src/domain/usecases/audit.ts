import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { insertAuditLog } from '../../store/repositories/audit.ts';
import { confirmKey } from '../../store/repositories/idempotency-keys.ts';
import { ConflictError } from '../errors.ts';
import type { Actor } from './context.ts';

/** What an audited mutation changed: the resource, and the environment it belongs to (if any). */
export interface AuditSubject {
  id: string | null;
  environmentId?: string | null;
  /** The resource's type; by default the action's first word (`service.update`: `service`). */
  type?: string;
}

/**
 * Writes the audit entry of a mutation. Call it with the mutation's transaction. Never pass secret values.
 * Every mutation writes its one entry here, so this is also where a request's Idempotency-Key is marked
 * done: the key and the work commit together, and work is never done without its key saying so.
 */
export async function recordAudit(
  db: Db,
  actor: Actor,
  action: string,
  subject: AuditSubject,
): Promise<void> {
  if (actor.idempotency && !(await confirmKey(db, actor.idempotency))) {
    throw new ConflictError(
      'This request held its Idempotency-Key so long that a retry took the key over; nothing was done here',
    );
  }
  await insertAuditLog(db, {
    id: randomUUID(),
    account_id: actor.accountId,
    actor: actor.name ?? (actor.tokenId ? 'API Token' : 'Operator'),
    token_id: actor.tokenId,
    action,
    resource_type: subject.type ?? action.slice(0, action.indexOf('.')),
    resource_id: subject.id,
    environment_id: subject.environmentId ?? null,
    request_id: actor.requestId,
    client_address: actor.clientAddress ?? null,
    user_id: actor.userId ?? null,
    user_email: actor.userEmail ?? null,
    token_name: actor.tokenName ?? null,
    user_agent: actor.userAgent ?? null,
  });
}

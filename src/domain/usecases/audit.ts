import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { insertAuditLog } from '../../store/repositories/audit.ts';
import type { Actor } from './context.ts';

export interface AuditEvent {
  action: string;
  resourceType: string;
  resourceId: string | null;
  environmentId: string | null;
}

/** Writes the audit entry of a mutation. Call it with the mutation's transaction. Never pass secret values. */
export async function recordAudit(db: Db, actor: Actor, event: AuditEvent): Promise<void> {
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

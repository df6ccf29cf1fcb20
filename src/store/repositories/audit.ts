import { sql } from 'kysely';
import type { Db } from '../database.ts';
import { recordAuditRow } from '../events.ts';
import type { NewAuditLog } from '../schema.ts';
import { type Page, pageAfter } from './paging.ts';

/** In a transaction the entry is written with its commit (store/events.ts), else at once. */
export async function insertAuditLog(db: Db, row: NewAuditLog): Promise<void> {
  if (db.isTransaction) await recordAuditRow(db, row);
  else await db.insertInto('audit_logs').values(row).execute();
}

/** What GET /v1/audit-logs narrows to; each absent part narrows nothing. */
export interface AuditFilter {
  /** A user's or a token's id, a user's email, a token's name, or an actor such as `Operator`. */
  actor?: string | undefined;
  action?: string | undefined;
  resourceType?: string | undefined;
  resourceId?: string | undefined;
  /** From this instant on (inclusive) and before that one (exclusive). */
  since?: Date | undefined;
  until?: Date | undefined;
  /** Only entries about these environments (a caller narrowed to them); undefined: every entry. */
  environmentIds?: readonly string[] | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function listAuditLogs(db: Db, accountId: string, page: Page, filter: AuditFilter = {}) {
  let query = db.selectFrom('audit_logs').selectAll().where('account_id', '=', accountId);
  const { actor } = filter;
  if (actor !== undefined) {
    if (UUID.test(actor)) {
      query = query.where((eb) => eb.or([eb('user_id', '=', actor), eb('token_id', '=', actor)]));
    } else if (actor.includes('@')) {
      query = query.where(sql<string>`lower(user_email)`, '=', actor.toLowerCase());
    } else {
      query = query.where((eb) => eb.or([eb('actor', '=', actor), eb('token_name', '=', actor)]));
    }
  }
  if (filter.action !== undefined) query = query.where('action', '=', filter.action);
  if (filter.resourceType !== undefined) query = query.where('resource_type', '=', filter.resourceType);
  if (filter.resourceId !== undefined) query = query.where('resource_id', '=', filter.resourceId);
  if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since);
  if (filter.until !== undefined) query = query.where('created_at', '<', filter.until);
  if (filter.environmentIds !== undefined) {
    const ids = filter.environmentIds;
    query = ids.length === 0 ? query.where(sql<boolean>`false`) : query.where('environment_id', 'in', ids);
  }
  return pageAfter(query, 'audit_logs', page);
}

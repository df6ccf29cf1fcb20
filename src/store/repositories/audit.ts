import type { Db } from '../database.ts';
import type { NewAuditLog } from '../schema.ts';
import { type Page, pageAfter } from './paging.ts';

export async function insertAuditLog(db: Db, row: NewAuditLog): Promise<void> {
  await db.insertInto('audit_logs').values(row).execute();
}

export async function listAuditLogs(db: Db, accountId: string, page: Page) {
  return pageAfter(
    db.selectFrom('audit_logs').selectAll().where('account_id', '=', accountId),
    'audit_logs',
    page,
  );
}

/**
 * Keyset pagination, newest first, on (created_at, id). Cursors are encoded at the API edge.
 * @module
 */
import { type SelectQueryBuilder, sql } from 'kysely';
import type { Database } from '../schema.ts';

export interface Position {
  createdAt: Date;
  id: string;
}

export interface Page {
  limit: number;
  /** The last row of the previous page. */
  after: Position | undefined;
}

type Paged = keyof Database & ('audit_logs' | 'services' | 'deployments' | 'webhook_deliveries');

export async function pageAfter<T extends { created_at: Date; id: string }, DB, TB extends keyof DB>(
  query: SelectQueryBuilder<DB, TB, T>,
  table: Paged,
  page: Page,
): Promise<{ items: T[]; next: Position | null }> {
  let q = query;
  if (page.after) {
    const { createdAt, id } = page.after;
    q = q.where(
      sql<boolean>`(${sql.ref(`${table}.created_at`)}, ${sql.ref(`${table}.id`)}) < (${createdAt.toISOString()}::timestamptz, ${id}::uuid)`,
    );
  }
  const rows = await q
    .orderBy(sql.ref(`${table}.created_at`), 'desc')
    .orderBy(sql.ref(`${table}.id`), 'desc')
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return {
    items,
    next: rows.length > page.limit && last ? { createdAt: last.created_at, id: last.id } : null,
  };
}

import { type SelectQueryBuilder, sql } from 'kysely';
import { isUuid } from '../../domain/api-token.ts';
import { ValidationError } from '../../domain/errors.ts';
import type { Database } from '../schema.ts';

/** Keyset pagination, newest first, on (created_at, id). The cursor is opaque to clients. */
export interface Page {
  limit: number;
  cursor: string | undefined;
}

interface Position {
  createdAt: string;
  id: string;
}

function encodeCursor(position: Position): string {
  return Buffer.from(`${position.createdAt}|${position.id}`).toString('base64url');
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function decodeCursor(cursor: string): Position {
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  // Only what encodeCursor writes: a real time (no February 30th, which Date.parse rolls over, and no
  // year 0, which PostgreSQL refuses) and a UUID.
  const exact = createdAt && ISO_MS.test(createdAt) && !createdAt.startsWith('0000') && new Date(createdAt);
  if (!exact || Number.isNaN(exact.getTime()) || exact.toISOString() !== createdAt || !id || !isUuid(id)) {
    throw ValidationError.fields([
      { field: 'cursor', error: 'cursor must be a next_cursor returned by this endpoint' },
    ]);
  }
  return { createdAt, id };
}

type Paged = keyof Database & ('audit_logs' | 'services' | 'deployments');

export async function pageAfter<T extends { created_at: Date; id: string }, DB, TB extends keyof DB>(
  query: SelectQueryBuilder<DB, TB, T>,
  table: Paged,
  page: Page,
): Promise<{ items: T[]; next_cursor: string | null }> {
  let q = query;
  if (page.cursor) {
    const { createdAt, id } = decodeCursor(page.cursor);
    q = q.where(
      sql<boolean>`(${sql.ref(`${table}.created_at`)}, ${sql.ref(`${table}.id`)}) < (${createdAt}::timestamptz, ${id}::uuid)`,
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
    next_cursor:
      rows.length > page.limit && last
        ? encodeCursor({ createdAt: last.created_at.toISOString(), id: last.id })
        : null,
  };
}

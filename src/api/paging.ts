/**
 * The list routes' cursors: opaque to clients, decoded and checked here at the edge, so that a cursor
 * this API did not hand out is a 422 on field `cursor` and never reaches a query.
 * @module
 */
import type { Static } from 'typebox';
import { ValidationError } from '../domain/errors.ts';
import { isUuid } from '../domain/uuid.ts';
import type { Page, Position } from '../store/repositories/paging.ts';
import type { PageQuery } from './schemas/common.ts';

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function encodeCursor(position: Position): string {
  return Buffer.from(`${position.createdAt.toISOString()}|${position.id}`).toString('base64url');
}

function badCursor(): ValidationError {
  return ValidationError.fields([
    { field: 'cursor', error: 'cursor must be a next_cursor returned by this endpoint' },
  ]);
}

/**
 * Only what encodeCursor writes: a real millisecond UTC time (no 2024-02-30; no year 0, which
 * JavaScript accepts and PostgreSQL refuses) and a UUID.
 */
function decodeCursor(cursor: string): Position {
  const [createdAt, id, ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (!createdAt || !id || rest.length > 0 || !ISO_MS.test(createdAt) || !isUuid(id)) throw badCursor();
  if (createdAt.startsWith('0000')) throw badCursor();
  const date = new Date(createdAt);
  if (Number.isNaN(date.getTime()) || date.toISOString() !== createdAt) throw badCursor();
  return { createdAt: date, id };
}

export function pageOf(query: Static<typeof PageQuery>): Page {
  return { limit: query.limit ?? 50, after: query.cursor ? decodeCursor(query.cursor) : undefined };
}

export function nextCursor(next: Position | null): string | null {
  return next ? encodeCursor(next) : null;
}

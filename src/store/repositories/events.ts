import { sql } from 'kysely';
import type { Db } from '../database.ts';
import type { EventRow } from '../schema.ts';

/** The settings row holding the newest `seq` retention removed: a cursor below it may have missed events. */
const PRUNED_THROUGH = 'events_pruned_through';

/** An account's events after `afterSeq`, oldest first. Committed in `seq` order (see migration 0018). */
export async function eventsAfter(
  db: Db,
  accountId: string,
  afterSeq: string,
  limit: number,
): Promise<EventRow[]> {
  return db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('seq', '>', afterSeq)
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/** The newest event's `seq` of the account (`0` when it has none): a stream opened now reads after it. */
export async function latestEventSeq(db: Db, accountId: string): Promise<string> {
  const row = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('seq').as('seq'))
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.seq ? String(row.seq) : '0';
}

/** Every event up to this `seq` is gone (`0`: none ever was). */
export async function eventsPrunedThrough(db: Db): Promise<string> {
  const row = await db
    .selectFrom('settings')
    .select('value')
    .where('key', '=', PRUNED_THROUGH)
    .executeTakeFirst();
  return row?.value ?? '0';
}

/**
 * Removes every event recorded before `before` (and what refers to it) and moves the watermark: a
 * prefix of `seq` goes, so "older than retention" is one comparison. Harmless when run by several
 * processes at once: the watermark only grows.
 */
export async function pruneEvents(db: Db, before: Date): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const edge = await trx
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .where('at', '<', before)
      .executeTakeFirst();
    if (!edge?.seq) return 0;
    const through = String(edge.seq);
    const removed = await trx.deleteFrom('events').where('seq', '<=', through).executeTakeFirst();
    await trx.deleteFrom('webhook_deliveries').where('event_seq', '<=', through).execute();
    await sql`INSERT INTO settings (key, value) VALUES (${PRUNED_THROUGH}, ${through})
      ON CONFLICT (key) DO UPDATE SET value = GREATEST(settings.value::bigint, excluded.value::bigint)::text`.execute(
      trx,
    );
    return Number(removed.numDeletedRows);
  });
}

/** Whether the event is still kept (retention has not dropped it). */
export async function eventKept(db: Db, seq: string): Promise<boolean> {
  return (
    (await db.selectFrom('events').select('seq').where('seq', '=', seq).executeTakeFirst()) !== undefined
  );
}

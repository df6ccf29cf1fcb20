import { sql } from 'kysely';
import type { Db } from '../database.ts';
import type { IdempotencyKeysTable } from '../schema.ts';

/** Keys are remembered this long (Stripe's 24 hours); an older one may be used again for anything. */
export const IDEMPOTENCY_KEY_TTL_HOURS = 24;
/** A request still running after ten minutes holds its key no more: its process died before answering. */
const ABANDONED_AFTER_SECONDS = 600;

export type StoredKey = Pick<IdempotencyKeysTable, 'fingerprint' | 'status' | 'body'>;

/**
 * Takes the key for a request: true when this request now holds it (a new key, an expired one, or one
 * whose request was abandoned), false when another request holds it or answered it already.
 */
export async function claimKey(db: Db, scope: string, key: string, fingerprint: string): Promise<boolean> {
  await db
    .deleteFrom('idempotency_keys')
    .where('scope', '=', scope)
    .where('key', '=', key)
    .where((eb) =>
      eb.or([
        eb('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`),
        eb.and([
          eb('status', 'is', null),
          eb('created_at', '<', sql<Date>`now() - make_interval(secs => ${ABANDONED_AFTER_SECONDS})`),
        ]),
      ]),
    )
    .execute();
  const inserted = await db
    .insertInto('idempotency_keys')
    .values({ scope, key, fingerprint })
    .onConflict((oc) => oc.columns(['scope', 'key']).doNothing())
    .returning('key')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function findKey(db: Db, scope: string, key: string): Promise<StoredKey | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'status', 'body'])
    .where('scope', '=', scope)
    .where('key', '=', key)
    .executeTakeFirst();
}

export async function recordAnswer(db: Db, scope: string, key: string, status: number, body: string) {
  await db
    .updateTable('idempotency_keys')
    .set({ status, body })
    .where('scope', '=', scope)
    .where('key', '=', key)
    .execute();
}

/** Frees a key whose request failed unexpectedly, so that a retry runs it again. */
export async function releaseKey(db: Db, scope: string, key: string) {
  await db
    .deleteFrom('idempotency_keys')
    .where('scope', '=', scope)
    .where('key', '=', key)
    .where('status', 'is', null)
    .execute();
}

/** Forgets keys past their time; called now and then so the table stays small. */
export async function purgeExpiredKeys(db: Db) {
  await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`)
    .execute();
}

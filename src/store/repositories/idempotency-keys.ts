import { randomUUID } from 'node:crypto';
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Db } from '../database.ts';
import type { IdempotencyKeysTable } from '../schema.ts';

/** Keys are remembered this long (Stripe's 24 hours); an older one may be used again for anything. */
export const IDEMPOTENCY_KEY_TTL_HOURS = 24;
/**
 * A request still running after ten minutes holds its key no more: its process died before answering.
 * Only a key whose work never committed is taken over (see `confirmKey`).
 */
const ABANDONED_AFTER_SECONDS = 600;

export type StoredKey = Pick<
  Selectable<IdempotencyKeysTable>,
  'fingerprint' | 'status' | 'body_sealed' | 'answer_headers' | 'done'
>;

/** A request's hold on its key: `claim` tells it apart from a later request that took the key over. */
export interface KeyClaim {
  scope: string;
  key: string;
  claim: string;
}

/**
 * Takes the key for a request: its claim when this request now holds it (a new key, an expired one, or
 * one whose request was abandoned before its work committed), undefined when another request holds it or
 * answered it already.
 */
export async function claimKey(
  db: Db,
  scope: string,
  key: string,
  fingerprint: string,
): Promise<KeyClaim | undefined> {
  await db
    .deleteFrom('idempotency_keys')
    .where('scope', '=', scope)
    .where('key', '=', key)
    .where((eb) =>
      eb.or([
        eb('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`),
        eb.and([
          eb('status', 'is', null),
          eb('done', '=', false),
          eb('created_at', '<', sql<Date>`now() - make_interval(secs => ${ABANDONED_AFTER_SECONDS})`),
        ]),
      ]),
    )
    .execute();
  const claim = randomUUID();
  const inserted = await db
    .insertInto('idempotency_keys')
    .values({ scope, key, fingerprint, claim })
    .onConflict((oc) => oc.columns(['scope', 'key']).doNothing())
    .returning('key')
    .executeTakeFirst();
  return inserted === undefined ? undefined : { scope, key, claim };
}

/**
 * Marks the key's work done. Call it in the transaction that does the work, so the two commit together:
 * false when the key is no longer this claim's (taken over as abandoned), and the work must not commit.
 */
export async function confirmKey(trx: Db, held: KeyClaim): Promise<boolean> {
  const confirmed = await trx
    .updateTable('idempotency_keys')
    .set({ done: true })
    .where('scope', '=', held.scope)
    .where('key', '=', held.key)
    .where('claim', '=', held.claim)
    .returning('key')
    .executeTakeFirst();
  return confirmed !== undefined;
}

export async function findKey(db: Db, scope: string, key: string): Promise<StoredKey | undefined> {
  return db
    .selectFrom('idempotency_keys')
    .select(['fingerprint', 'status', 'body_sealed', 'answer_headers', 'done'])
    .where('scope', '=', scope)
    .where('key', '=', key)
    .executeTakeFirst();
}

export async function recordAnswer(
  db: Db,
  held: KeyClaim,
  status: number,
  bodySealed: string,
  headers: Record<string, string> | null,
) {
  await db
    .updateTable('idempotency_keys')
    .set({ status, body_sealed: bodySealed, answer_headers: headers && JSON.stringify(headers) })
    .where('scope', '=', held.scope)
    .where('key', '=', held.key)
    .where('claim', '=', held.claim)
    .execute();
}

/**
 * Frees a key whose request failed unexpectedly before its work committed, so that a retry runs it
 * again; true when it did. A key whose work is done keeps its answer instead.
 */
export async function releaseKey(db: Db, held: KeyClaim): Promise<boolean> {
  const released = await db
    .deleteFrom('idempotency_keys')
    .where('scope', '=', held.scope)
    .where('key', '=', held.key)
    .where('claim', '=', held.claim)
    .where('done', '=', false)
    .returning('key')
    .executeTakeFirst();
  return released !== undefined;
}

/** Forgets keys past their time; called now and then so the table stays small. */
export async function purgeExpiredKeys(db: Db) {
  await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', sql<Date>`now() - make_interval(hours => ${IDEMPOTENCY_KEY_TTL_HOURS})`)
    .execute();
}

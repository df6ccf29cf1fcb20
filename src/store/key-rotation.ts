import { setTimeout as sleep } from 'node:timers/promises';
import { type RawBuilder, sql } from 'kysely';
import type { Db } from './database.ts';
import { recordSealingKey, retireSealingKeys, SecretBox, sealingKeyIds } from './secret-box.ts';

/**
 * Every column that holds a sealed value, with the primary key that names its row. A column that seals
 * must be listed here: test/process/key-rotation.test.ts fails when any text column still holds a value
 * under the old key after a rotation.
 */
const SEALED: ReadonlyArray<{ table: string; key: string[]; columns: string[] }> = [
  { table: 'secrets', key: ['scope_id', 'key'], columns: ['value_sealed'] },
  { table: 'deployments', key: ['id'], columns: ['variables_sealed'] },
  { table: 'service_resources', key: ['service_id', 'kind', 'type', 'resource_id'], columns: ['password'] },
  { table: 'webhooks', key: ['id'], columns: ['secret_sealed'] },
  { table: 'git_connections', key: ['id'], columns: ['secret_sealed', 'webhook_secret_sealed'] },
  { table: 'idempotency_keys', key: ['scope', 'key'], columns: ['body_sealed'] },
  { table: 'certificates', key: ['custom_domain_id'], columns: ['cert_pem', 'private_key', 'order_key'] },
  { table: 'api_certificates', key: ['name'], columns: ['cert_pem', 'private_key', 'order_key'] },
  { table: 'acme_accounts', key: ['directory_url'], columns: ['account_key'] },
  { table: 'ingress_certificates', key: ['id'], columns: ['cert_pem', 'private_key', 'order_key'] },
  { table: 'acme_challenges', key: ['token'], columns: ['alpn_key'] },
  { table: 'sso_configs', key: ['account_id'], columns: ['client_secret_sealed'] },
];

/** A sweep that still finds values under an old key this many times means a process still seals with it. */
const SWEEPS = 3;

export interface RotationOptions {
  /** Rows read and re-sealed per transaction. */
  batchSize: number;
  /** A pause between batches, to leave the database to the requests it serves. */
  pauseMs: number;
  onBatch?: (table: string, resealed: number) => void;
}

export class RotationStalledError extends Error {}

const list = (names: string[]) => sql.join(names.map((n) => sql.ref(n)));
const tuple = (values: unknown[]) => sql.join(values.map((v) => sql`${v}`));

/**
 * Re-seals every sealed value under the box's sealing key while the server serves: in batches walked
 * in primary key order, each in its own short transaction, each value replaced only if it is still the
 * one read (a concurrent write wins; it seals with the new key itself). Idempotent: values already under
 * the sealing key are left alone, so an interrupted rotation resumes by running again. It ends by
 * recording the sealing key as the only one in use, after a sweep found nothing under another.
 */
export async function rotateSealedValues(
  db: Db,
  box: SecretBox,
  options: RotationOptions,
): Promise<{ resealed: number; retired: string[] }> {
  const current = box.currentId;
  await recordSealingKey(db, current);
  let resealed = 0;
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    const were = await sealingKeyIds(db);
    for (const table of SEALED) resealed += await resealTable(db, box, table, options);
    const left = await valuesUnderOtherKeys(db, current);
    if (left === 0 && (await retireSealingKeys(db, were, current))) {
      return { resealed, retired: were.filter((id) => id !== current) };
    }
  }
  throw new RotationStalledError(
    `values are still being sealed with another key than ${current}: a Berth process without this key first ` +
      'in BERTH_MASTER_KEY is running. Restart every process with the new key first, then run the rotation again.',
  );
}

async function resealTable(
  db: Db,
  box: SecretBox,
  { table, key, columns }: (typeof SEALED)[number],
  options: RotationOptions,
): Promise<number> {
  let after: unknown[] | undefined;
  let resealed = 0;
  for (;;) {
    // Re-sealing changes no secret: it records no event (it writes the sealed column, not a secret).
    const batch = await db.transaction().execute(async (trx) => {
      const from: RawBuilder<unknown> = after ? sql`WHERE (${list(key)}) > (${tuple(after)})` : sql``;
      const { rows } = await sql<Record<string, string | null>>`
        SELECT ${list([...key, ...columns])} FROM ${sql.table(table)} ${from}
        ORDER BY ${list(key)} LIMIT ${options.batchSize}`.execute(trx);
      let changed = 0;
      for (const row of rows) {
        for (const column of columns) {
          const sealed = row[column];
          if (!sealed || SecretBox.keyIdOf(sealed) === box.currentId) continue;
          const names = sql.join(
            key.map((k) => sql`${sql.ref(k)} = ${row[k]}`),
            sql` AND `,
          );
          const done = await sql`
            UPDATE ${sql.table(table)} SET ${sql.ref(column)} = ${box.seal(box.open(sealed))}
            WHERE ${names} AND ${sql.ref(column)} = ${sealed}`.execute(trx);
          changed += Number(done.numAffectedRows ?? 0n);
        }
      }
      return { last: rows.at(-1), count: rows.length, changed };
    });
    resealed += batch.changed;
    if (batch.count > 0) options.onBatch?.(table, batch.changed);
    if (!batch.last || batch.count < options.batchSize) return resealed;
    const last = batch.last;
    after = key.map((k) => last[k]);
    if (options.pauseMs > 0) await sleep(options.pauseMs);
  }
}

/** Values sealed with any key but `current` (plain reads: no lock is held). */
async function valuesUnderOtherKeys(db: Db, current: string): Promise<number> {
  let count = 0;
  for (const { table, columns } of SEALED) {
    for (const column of columns) {
      const { rows } = await sql<{ n: string | number }>`
        SELECT count(*) AS n FROM ${sql.table(table)}
        WHERE ${sql.ref(column)} IS NOT NULL AND split_part(${sql.ref(column)}, ':', 2) <> ${current}`.execute(
        db,
      );
      count += Number(rows[0]?.n ?? 0);
    }
  }
  return count;
}

import { type Insertable, sql } from 'kysely';
import type { Db } from '../database.ts';
import { recordEvents } from '../events.ts';
import type { SecretRow, SecretsTable } from '../schema.ts';

/**
 * The secrets of several scopes (an environment's and its service's) in one statement, in byte order
 * whatever the database's collation: the same order the PUT answers in.
 */
export async function listSecretsOf(db: Db, scopeIds: string[]): Promise<SecretRow[]> {
  return db
    .selectFrom('secrets')
    .selectAll()
    .where('scope_id', 'in', scopeIds)
    .orderBy(sql`key COLLATE "C"`)
    .execute();
}

export async function listSecrets(db: Db, scopeId: string): Promise<SecretRow[]> {
  return listSecretsOf(db, [scopeId]);
}

/**
 * Changes one scope's secrets key by key: removes `dropped`, writes `written` (new keys inserted,
 * existing ones updated in place). Keys in neither are not touched, so they emit no event. Run it
 * inside the caller's transaction.
 */
export async function changeSecrets(
  db: Db,
  scopeId: string,
  dropped: string[],
  written: Insertable<SecretsTable>[],
): Promise<void> {
  if (dropped.length > 0) {
    const gone = await db
      .deleteFrom('secrets')
      .where('scope_id', '=', scopeId)
      .where('key', 'in', dropped)
      .returningAll()
      .execute();
    await recordEvents(db, 'secret', 'deleted', gone);
  }
  if (written.length === 0) return;
  const rows = await db
    .insertInto('secrets')
    .values(written)
    .onConflict((oc) =>
      oc.columns(['scope_id', 'key']).doUpdateSet((eb) => ({
        value_sealed: eb.ref('excluded.value_sealed'),
        description: eb.ref('excluded.description'),
        use_preview: eb.ref('excluded.use_preview'),
        is_sensitive: eb.ref('excluded.is_sensitive'),
        expose_to_chart: eb.ref('excluded.expose_to_chart'),
        chart_default_val: eb.ref('excluded.chart_default_val'),
        dep_export: eb.ref('excluded.dep_export'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .returningAll()
    .returning(sql<boolean>`xmax = 0`.as('inserted'))
    .execute();
  // Every write of a key is an event, even one that sets the same value; in the order written.
  for (const row of rows) await recordEvents(db, 'secret', row.inserted ? 'created' : 'updated', [row]);
}

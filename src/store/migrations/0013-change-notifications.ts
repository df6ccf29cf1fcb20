import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Every change to what clients poll is announced on channel `berth_changes`, delivered when the
 * change commits: the payload is space-separated tags (`deployment:<id> service:<id>`) naming what
 * the row feeds. The API's read cache (api/read-cache.ts) drops what a tag names. Each trigger's
 * arguments are pairs: a tag's kind and the column holding its id.
 */
const WATCHED: Array<[table: string, args: string]> = [
  ['deployments', `'deployment', 'id', 'service', 'service_id'`],
  ['services', `'service', 'id'`],
  ['custom_domains', `'service', 'service_id'`],
  ['service_observations', `'service', 'service_id'`],
  ['environments', `'env', 'id'`],
];

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE FUNCTION berth_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      changed jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
      tags text := '';
      i integer := 0;
    BEGIN
      WHILE i < TG_NARGS LOOP
        tags := tags || ' ' || TG_ARGV[i] || ':' || coalesce(changed ->> TG_ARGV[i + 1], '');
        i := i + 2;
      END LOOP;
      PERFORM pg_notify('berth_changes', ltrim(tags));
      RETURN NULL;
    END $$`,
    ...WATCHED.map(
      ([table, args]) =>
        `CREATE TRIGGER ${table}_notify_change AFTER INSERT OR UPDATE OR DELETE ON ${table}
         FOR EACH ROW EXECUTE FUNCTION berth_notify_change(${args})`,
    ),
  ]);
}

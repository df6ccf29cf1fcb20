import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * The change notifications (0013) read the two columns their tags name, where they turned the whole
 * row into jsonb to read one field: a services row is some 60 columns, and every deployment changes
 * rows of deployments and services several times (docs/performance.md, "Deployments"). Same tags,
 * same channel; the triggers' arguments name no other column.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE OR REPLACE FUNCTION berth_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      changed record;
      tags text := '';
      value text;
      i integer := 0;
    BEGIN
      IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
      WHILE i < TG_NARGS LOOP
        IF TG_ARGV[i + 1] = 'id' THEN
          value := changed.id;
        ELSIF TG_ARGV[i + 1] = 'service_id' THEN
          value := changed.service_id;
        ELSE
          RAISE EXCEPTION 'berth_notify_change: a tag names id or service_id, not %', TG_ARGV[i + 1];
        END IF;
        tags := tags || ' ' || TG_ARGV[i] || ':' || coalesce(value, '');
        i := i + 2;
      END LOOP;
      PERFORM pg_notify('berth_changes', ltrim(tags));
      RETURN NULL;
    END $$`,
  ]);
}

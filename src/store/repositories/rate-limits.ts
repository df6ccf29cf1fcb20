import { sql } from 'kysely';
import type { Db } from '../database.ts';

/**
 * Counts `requests` requests (default one) in `key`'s fixed window of `windowMs`, starting a new
 * window when the last one has ended; returns the hits counted so far, these included. One statement:
 * concurrent requests of several processes serialize on the row, so none is lost. The database's
 * clock decides, so processes whose clocks differ still agree.
 */
export async function countInWindow(
  db: Db,
  key: string,
  windowMs: number,
  requests = 1,
): Promise<{ hits: number; ttlMs: number }> {
  const window = sql`make_interval(secs => ${windowMs / 1000})`;
  const ended = sql`rate_limit_windows.window_start + ${window} <= now()`;
  const row = await db
    .insertInto('rate_limit_windows')
    .values({ key, window_start: sql`now()`, hits: requests })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        window_start: sql`CASE WHEN ${ended} THEN now() ELSE rate_limit_windows.window_start END`,
        hits: sql`CASE WHEN ${ended} THEN ${requests}::integer ELSE rate_limit_windows.hits + ${requests}::integer END`,
      }),
    )
    .returning([
      'hits',
      sql<number>`ceil(extract(epoch from (window_start + ${window} - now())) * 1000)`.as('ttl_ms'),
    ])
    .executeTakeFirstOrThrow();
  return { hits: row.hits, ttlMs: Math.max(0, Number(row.ttl_ms)) };
}

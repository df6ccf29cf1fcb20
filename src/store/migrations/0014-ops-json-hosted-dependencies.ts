import { type Kysely, sql } from 'kysely';

/**
 * ops.json's `dependencies` used to be Berth's own array of `{id, kind, exports}`; it is now the hosted
 * platform's object of kinds, each listing its resources by type. Stored services are rewritten once:
 * each item goes under its kind's documented type (`resources` for a kind the hosted format does not
 * document), keeping its id and exports. Written out here rather than imported from domain/: a
 * migration must keep doing what it did when it first ran.
 */
const TYPES: Record<string, string> = {
  s3: 'buckets',
  sns: 'topics',
  sqs: 'queues',
  rds: 'instances',
  elasticache: 'clusters',
};

type Item = { id?: unknown; kind?: unknown; exports?: unknown };

function hostedDependencies(items: Item[]): Record<string, Record<string, unknown[]>> {
  const out: Record<string, Record<string, unknown[]>> = {};
  for (const { id, kind, exports } of items) {
    if (typeof kind !== 'string') continue;
    const type = TYPES[kind] ?? 'resources';
    const byType = out[kind] ?? {};
    byType[type] = [...(byType[type] ?? []), exports === undefined ? { id } : { id, exports }];
    out[kind] = byType;
  }
  return out;
}

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ id: string; ops_json: string }>`
    SELECT id, ops_json FROM services WHERE ops_json LIKE '%"dependencies"%'`.execute(db);
  for (const row of rows) {
    let document: Record<string, unknown>;
    try {
      document = JSON.parse(row.ops_json);
    } catch {
      continue;
    }
    if (!Array.isArray(document.dependencies)) continue;
    document.dependencies = hostedDependencies(document.dependencies as Item[]);
    await sql`UPDATE services SET ops_json = ${JSON.stringify(document)} WHERE id = ${row.id}`.execute(db);
  }
}

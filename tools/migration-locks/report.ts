/**
 * The migration lock report (docs/operations.md, "Upgrades"): every migration applied, one at a time,
 * to a PostgreSQL database seeded with many services and deployments (at the schema of the migrations
 * that create them), while a second connection samples the locks the migrating connection holds. It
 * reports, per migration, how long it took and the longest lock on a table that existed before it that
 * blocks writes (ShareLock or stronger) or reads (AccessExclusiveLock): what an upgrade makes the other
 * Berth processes wait for.
 *
 *   node tools/migration-locks/report.ts [services] [deployments]    (BENCH_POSTGRES_URL, default local)
 *
 * test/lifecycle/migration-locks.test.ts runs it at a reduced scale; bench/migration-locks.ts at full.
 * @module
 */
import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { KNOWN_MIGRATIONS, migrateToLatest } from '../../src/store/migrate.ts';
import type { Database } from '../../src/store/schema.ts';

/** The migrations that create the seeded tables; the report measures every one after them. */
const SEEDED_AT = ['0001-spine', '0002-lifecycle'];
/** Lock modes that make other sessions wait: writes from ShareLock up, reads too at AccessExclusiveLock. */
const BLOCKS_WRITES = ['ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'];
const SAMPLE_EVERY_MS = 2;

export interface MigrationLocks {
  migration: string;
  ms: number;
  /** The longest lock blocking writes on a pre-existing table, or null when it took none. */
  longest: { table: string; mode: string; ms: number } | null;
}

export interface LockReport {
  services: number;
  deployments: number;
  seedMs: number;
  migrations: MigrationLocks[];
  /** The longest of them all. */
  longest: (MigrationLocks['longest'] & { migration: string }) | null;
}

export async function migrationLockReport(options: {
  adminUrl: string;
  services: number;
  deployments: number;
}): Promise<LockReport> {
  const name = `berth_locks_${randomBytes(6).toString('hex')}`;
  await onAdmin(options.adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(options.adminUrl);
  url.pathname = `/${name}`;
  // One connection migrates (its pid is the one watched), another samples pg_locks.
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url.toString(), max: 1 }) }),
  });
  const watcher = new pg.Client({ connectionString: url.toString() });
  await watcher.connect();
  try {
    await migrateToLatest(db, SEEDED_AT);
    const seedStart = performance.now();
    await seed(db, options.services, options.deployments);
    const seedMs = performance.now() - seedStart;
    const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db);
    const pid = rows[0]?.pid as number;
    const applied = [...SEEDED_AT];
    const migrations: MigrationLocks[] = [];
    for (const migration of KNOWN_MIGRATIONS.filter((m) => !SEEDED_AT.includes(m))) {
      applied.push(migration);
      migrations.push(await measure(db, watcher, pid, migration, () => migrateToLatest(db, applied)));
    }
    const longest = migrations
      .filter((m) => m.longest)
      .map((m) => ({ migration: m.migration, ...(m.longest as NonNullable<MigrationLocks['longest']>) }))
      .sort((a, b) => b.ms - a.ms)[0];
    return {
      services: options.services,
      deployments: options.deployments,
      seedMs,
      migrations,
      longest: longest ?? null,
    };
  } finally {
    await watcher.end();
    await db.destroy();
    await onAdmin(options.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

/** One statement on the admin connection, held no longer than it takes. */
async function onAdmin(adminUrl: string, statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

async function seed(db: Kysely<Database>, services: number, deployments: number): Promise<void> {
  await sql`INSERT INTO accounts (id, name, plan) VALUES (gen_random_uuid(), 'locks', 'pro')`.execute(db);
  await sql`INSERT INTO environments (id, account_id, name, cloud, region, state)
            SELECT gen_random_uuid(), id, 'locks', 'aws', 'us-east-1', 'available' FROM accounts`.execute(db);
  await sql`INSERT INTO services (id, account_id, environment_id, name, type, state, source, docker_image,
              replica_count, cpu_count_min, memory_mb_min, subdomain, kube_secret, kube_dep_secret,
              kube_preview_dep_secret)
            SELECT gen_random_uuid(), e.account_id, e.id, 'service-' || n, 'web', 'running', 'docker_image',
              'acme/web', 1, 0.5, 256, 'service-' || n, 's', 'd', 'p'
            FROM environments e, generate_series(1, ${services}) AS n`.execute(db);
  // Each service gets its share of the deployments.
  const perService = Math.max(1, Math.round(deployments / Math.max(1, services)));
  await sql`INSERT INTO deployments (id, account_id, environment_id, service_id, type, state, docker_image_tag)
            SELECT gen_random_uuid(), s.account_id, s.environment_id, s.id, 'deploy', 'success', 'v' || n
            FROM services s, generate_series(1, ${perService}) AS n`.execute(db);
  await sql`ANALYZE`.execute(db);
}

async function measure(
  db: Kysely<Database>,
  watcher: pg.Client,
  pid: number,
  migration: string,
  run: () => Promise<void>,
): Promise<MigrationLocks> {
  const existing = new Map(
    (
      await sql<{ oid: number; name: string }>`
      SELECT oid::int AS oid, relname AS name FROM pg_class
      WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace`.execute(db)
    ).rows.map((r) => [r.oid, r.name]),
  );
  const firstSeen = new Map<string, number>();
  let running = true;
  const sampling = (async () => {
    while (running) {
      const { rows } = await watcher.query<{ relation: number; mode: string }>(
        `SELECT relation::int AS relation, mode FROM pg_locks
         WHERE pid = $1 AND locktype = 'relation' AND granted AND mode = ANY($2)`,
        [pid, BLOCKS_WRITES],
      );
      const now = performance.now();
      for (const { relation, mode } of rows) {
        const table = existing.get(relation);
        if (table && !firstSeen.has(`${table} ${mode}`)) firstSeen.set(`${table} ${mode}`, now);
      }
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_EVERY_MS));
    }
  })();
  const start = performance.now();
  try {
    await run();
  } finally {
    running = false;
    await sampling;
  }
  // A lock is held until the migration's transaction commits, which is when run() returns.
  const end = performance.now();
  let longest: MigrationLocks['longest'] = null;
  for (const [key, seen] of firstSeen) {
    const [table, mode] = key.split(' ') as [string, string];
    const ms = end - seen;
    if (!longest || ms > longest.ms) longest = { table, mode, ms };
  }
  return { migration, ms: end - start, longest };
}

export function formatReport(report: LockReport): string {
  const lines = [
    `Migration lock report: ${report.services} services, ${report.deployments} deployments (seeded in ${Math.round(report.seedMs)} ms)`,
    '',
    'migration                                 took ms   longest lock blocking writes (table, mode, held ms)',
  ];
  for (const m of report.migrations) {
    const lock = m.longest ? `${m.longest.table} ${m.longest.mode} ${Math.round(m.longest.ms)}` : '-';
    lines.push(`${m.migration.padEnd(42)}${String(Math.round(m.ms)).padStart(7)}   ${lock}`);
  }
  const l = report.longest;
  lines.push(
    '',
    l
      ? `Longest lock held: ${Math.round(l.ms)} ms, ${l.mode} on ${l.table} (${l.migration})`
      : 'Longest lock held: none blocking writes',
  );
  return lines.join('\n');
}

if (import.meta.main) {
  const [services = 100_000, deployments = 1_000_000] = process.argv.slice(2).map(Number);
  const adminUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const report = await migrationLockReport({ adminUrl, services, deployments });
  process.stdout.write(`${formatReport(report)}\n`);
}

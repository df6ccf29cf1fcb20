import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KNOWN_MIGRATIONS } from '../../src/store/migrate.ts';
import { formatReport, migrationLockReport } from '../../tools/migration-locks/report.ts';
import { TEST_DATABASE } from '../helpers/database.ts';

/**
 * The migration lock report (tools/migration-locks/report.ts) at a reduced scale: every migration is
 * applied to a database of 2,000 services and 20,000 deployments and none but the ones already shipped
 * with a table rewrite holds a lock that blocks writes for long. The bench runs it at full scale.
 */
const ADMIN_URL = process.env.BERTH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * Shipped before the report existed, and already run wherever Berth was installed: 0007 adds a column
 * whose default is a sequence, which rewrites deployments under an AccessExclusiveLock (docs/operations.md).
 */
const REWRITES = ['0007-generations'];
/** At this scale a lock blocking writes longer than this means a migration rewrites or scans a big table. */
const BUDGET_MS = 2_000;

test('every migration applied to a seeded database reports its longest write-blocking lock; new ones stay short', {
  skip:
    TEST_DATABASE !== 'postgres' &&
    'locks between processes are a PostgreSQL matter: the embedded database has one connection',
}, async (t) => {
  const report = await migrationLockReport({ adminUrl: ADMIN_URL, services: 2_000, deployments: 20_000 });
  t.diagnostic(formatReport(report));
  assert.deepEqual(
    report.migrations.map((m) => m.migration),
    KNOWN_MIGRATIONS.filter((m) => m !== '0001-spine' && m !== '0002-lifecycle'),
  );
  assert.ok(report.longest, 'some migration takes a write-blocking lock');
  for (const m of report.migrations) {
    if (REWRITES.includes(m.migration) || !m.longest) continue;
    assert.ok(
      m.longest.ms < BUDGET_MS,
      `${m.migration} holds ${m.longest.mode} on ${m.longest.table} for ${Math.round(m.longest.ms)} ms: expand, backfill in batches, contract later`,
    );
  }
});

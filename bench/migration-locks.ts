/**
 * `npm run bench` (last step): the migration lock report at full scale, 100,000 services and 1,000,000
 * deployments (BENCH_LOCK_SERVICES, BENCH_LOCK_DEPLOYMENTS), on PostgreSQL (BENCH_POSTGRES_URL, an
 * admin connection: the run creates and drops a database of its own). Prints the report and writes
 * bench/results/migration-locks.json. tools/migration-locks/report.ts says what it measures.
 */
import fs from 'node:fs';
import path from 'node:path';
import { formatReport, migrationLockReport } from '../tools/migration-locks/report.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const report = await migrationLockReport({
  adminUrl: process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  services: Number(process.env.BENCH_LOCK_SERVICES ?? 100_000),
  deployments: Number(process.env.BENCH_LOCK_DEPLOYMENTS ?? 1_000_000),
});
process.stdout.write(`${formatReport(report)}\n`);
fs.writeFileSync(path.join(HERE, 'results', 'migration-locks.json'), `${JSON.stringify(report, null, 2)}\n`);

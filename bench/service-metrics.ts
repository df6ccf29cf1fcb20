/**
 * The service metrics row of `npm run bench` (issue 29): the CPU one collection round costs per 100
 * services (BENCH_METRICS_SERVICES, 100), in this process: the collector asks the sim provider for a
 * sample of each deployed service and stores them, on an embedded database (so the database's work is
 * counted too). The collector runs once a minute, so the share of a core it takes is that over 60 s.
 * The services are one created through the API and copied in SQL, each with a running simulated
 * workload. Settings: BENCH_ROUNDS (3; each round the median of 10 collections). Run alone with
 * `node bench/service-metrics.ts`.
 * @module
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../src/api/app.ts';
import { firstStart } from '../src/bootstrap.ts';
import { loadConfig } from '../src/config.ts';
import { collectServiceMetrics } from '../src/jobs/service-metrics.ts';
import { openRuntime } from '../src/runtime.ts';
import { median } from './median.ts';
import { type AddRow, log } from './process.ts';
import { BENCH_SERVICE } from './service.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
const SERVICES = Number(process.env.BENCH_METRICS_SERVICES || 100);
const COLLECTIONS = 10;
/** A round a minute may take at most 1% of one core: 600 ms of CPU per 100 services. */
const TARGET_CPU_MS = 600;

export async function serviceMetricsRows(addRow: AddRow): Promise<void> {
  log(`service metrics: one collection round over ${SERVICES} services`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-svcmetrics-'));
  const config = { ...loadConfig({}), dataDir, databaseUrl: undefined, logLevel: 'silent' };
  const runtime = await openRuntime(config, pino({ level: 'silent' }));
  try {
    const { deps } = runtime;
    const first = await firstStart(deps);
    if (!first) throw new Error('the bench needs a fresh database');
    // No worker provisions it here: the sim would only mark it available.
    await sql`UPDATE environments SET state = 'available'`.execute(deps.store.db);
    const app = await buildApp(deps, { adminToken: 'bench' });
    const created = await app.inject({
      method: 'POST',
      url: `/v1/environments/${first.environmentId}/services`,
      headers: { authorization: `Bearer ${first.apiToken}` },
      payload: { ...BENCH_SERVICE, name: 'bench svcmetrics' },
    });
    await app.close();
    if (created.statusCode !== 200) throw new Error(`creating the service: ${created.body}`);
    const id = created.json().data.service.id as string;
    const db = deps.store.db;
    const { rows } = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'services'
      ORDER BY ordinal_position`.execute(db);
    const copied: Record<string, string> = {
      id: 'gen_random_uuid()',
      name: `name || ' ' || i`,
      subdomain: `subdomain || '-' || i`,
    };
    const columns = rows.map((r) => r.column_name);
    await sql
      .raw(
        `INSERT INTO services (${columns.map((c) => `"${c}"`).join(', ')})
         SELECT ${columns.map((c) => copied[c] ?? `"${c}"`).join(', ')}
         FROM services, generate_series(1, ${SERVICES - 1}) AS i WHERE services.id = '${id}'`,
      )
      .execute(db);
    // Every one deployed and running, as the collector finds them.
    await sql`INSERT INTO service_observations (service_id, run_status, ready_count)
      SELECT id, 'running', 2 FROM services`.execute(db);
    await sql`INSERT INTO sim_workloads (service_id, deployment_id, target, replicas, run_status, generation, cron_jobs)
      SELECT id, gen_random_uuid(), 'latest', 2, 'running', 1, '[]' FROM services`.execute(db);

    const start = Date.now();
    let minute = 0;
    const rounds: Record<string, number>[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const cpu: number[] = [];
      const wall: number[] = [];
      for (let c = 0; c < COLLECTIONS; c++) {
        const at = new Date(start + minute++ * 60_000);
        const cpuFrom = process.cpuUsage();
        const wallFrom = performance.now();
        const stored = await collectServiceMetrics(deps, at);
        if (stored !== SERVICES) throw new Error(`a round stored ${stored} samples of ${SERVICES}`);
        wall.push(performance.now() - wallFrom);
        const used = process.cpuUsage(cpuFrom);
        cpu.push((used.user + used.system) / 1000);
      }
      const cpuMs = (median(cpu) * 100) / SERVICES;
      rounds.push({
        cpu_ms_per_round_per_100_services: cpuMs,
        wall_ms_per_round_per_100_services: (median(wall) * 100) / SERVICES,
        share_of_one_core_pct: (cpuMs / 60_000) * 100,
        load_average_1m: os.loadavg()[0] as number,
      });
    }
    addRow(
      'service metrics: one collection round per 100 services (sim, embedded, database included)',
      `<= ${TARGET_CPU_MS} ms CPU (1% of a core at one round a minute; issue 29)`,
      rounds,
      (m) => (m.cpu_ms_per_round_per_100_services as number) <= TARGET_CPU_MS,
    );
  } finally {
    await runtime.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// Run alone: the row on stdout.
if (process.argv[1] === new URL(import.meta.url).pathname) {
  await serviceMetricsRows((measure, target, rounds, met) => {
    const keys = Object.keys(rounds[0] ?? {});
    const med = Object.fromEntries(
      keys.map((k) => [k, Math.round(median(rounds.map((r) => r[k] as number)) * 100) / 100]),
    );
    console.log(JSON.stringify({ measure, target, rounds, median: med, met: met(med) }, null, 2));
  });
}

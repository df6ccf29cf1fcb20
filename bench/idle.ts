/**
 * An idle embedded `berth serve` (the API and the workers in this process, a new data directory, the sim
 * provider): its statements a minute, by statement, and this process's CPU (ms/s) over a window after the
 * start settles. BENCH_IDLE_SETTLE_S (60) and BENCH_IDLE_WINDOW_S (60) set the two spans.
 *
 *   node bench/idle.ts
 *
 * Prints one JSON line: {"benchmark":"idle",...}.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { startServer } from '../src/runtime.ts';

const settleS = Number(process.env.BENCH_IDLE_SETTLE_S ?? 60);
const windowS = Number(process.env.BENCH_IDLE_WINDOW_S ?? 60);

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-idle-'));
const env: NodeJS.ProcessEnv = { ...process.env, BERTH_DATA_DIR: dataDir, BERTH_PORT: '0' };
delete env.BERTH_DATABASE_URL;
const counts = new Map<string, number>();
let counting = false;
const server = await startServer(loadConfig(env), {
  logger: pino({ level: 'silent' }),
  onQuery: (sql) => {
    if (!counting) return;
    const key = sql.replace(/\s+/g, ' ').slice(0, 90);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  },
});
try {
  await sleep(settleS * 1000);
  counting = true;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await sleep(windowS * 1000);
  const used = process.cpuUsage(cpu);
  const elapsedS = (performance.now() - started) / 1000;
  counting = false;
  const perMinute = Object.fromEntries(
    [...counts].sort((a, b) => b[1] - a[1]).map(([sql, n]) => [sql, Math.round((n * 600) / elapsedS) / 10]),
  );
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  console.log(
    JSON.stringify({
      benchmark: 'idle',
      settle_s: settleS,
      window_s: windowS,
      cpu_ms_per_s: Math.round(((used.user + used.system) / 1000 / elapsedS) * 100) / 100,
      statements_per_min: Math.round((total * 600) / elapsedS) / 10,
      by_statement: perMinute,
      load_average_1m: os.loadavg()[0],
    }),
  );
} finally {
  await server.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

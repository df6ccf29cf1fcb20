/**
 * `npm run bench` (second step): the server's memory under 60 s of mixed load. Starts `berth serve` as
 * its own process on a fresh embedded database, warms it up, reads its RSS, drives mixed traffic (lists,
 * reads, creates with deploys, bodies nested too deep, bad queries and cursors), reads RSS again, idles,
 * and reads it a last time. Writes bench/results/memory.json; `returned` says whether the RSS after idle
 * is within 10% of where it started.
 *
 * Settings: BENCH_MEMORY_LOAD_S (default 60), BENCH_MEMORY_IDLE_S (20), BENCH_CONNECTIONS (20).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type AutocannonRequest } from 'autocannon';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPORT_FILE = path.join(HERE, 'results', 'memory.json');
const LOAD_S = Number(process.env.BENCH_MEMORY_LOAD_S ?? 60);
const IDLE_S = Number(process.env.BENCH_MEMORY_IDLE_S ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 102.4) / 10;
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-memory-'));
const child = spawn(process.execPath, [path.join(HERE, '..', 'bin', 'berth.js'), 'serve'], {
  env: {
    ...process.env,
    BERTH_DATA_DIR: dataDir,
    BERTH_PORT: '0',
    BERTH_LOG_LEVEL: 'warn',
    BERTH_SIM_STEP_MS: '10',
    BERTH_RATE_LIMIT_PER_MIN: '10000000',
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let out = '';
child.stdout.on('data', (chunk) => {
  out += chunk;
});
try {
  const deadline = Date.now() + 120_000;
  while (!/environment:\s+[0-9a-f-]{36}/.test(out) || !/listening on http/.test(out)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`berth did not start: ${out}`);
    await sleep(100);
  }
  const base = (/listening on (http:\/\/\S+)/.exec(out) as RegExpExecArray)[1] as string;
  const token = (/API token:\s+([0-9a-f-]{36})/.exec(out) as RegExpExecArray)[1] as string;
  const envId = (/environment:\s+([0-9a-f-]{36})/.exec(out) as RegExpExecArray)[1] as string;
  const env = `/v1/environments/${envId}`;
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const service = {
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 64,
    docker_image: 'acme/bench',
    deploy_now: true,
  };
  let n = 0;
  const load = (seconds: number) =>
    autocannon({
      url: base,
      connections: CONNECTIONS,
      duration: seconds,
      headers,
      requests: [
        { method: 'GET', path: `${env}/services?limit=20` },
        { method: 'GET', path: env },
        {
          method: 'POST',
          path: `${env}/services`,
          setupRequest: (request: AutocannonRequest) => ({
            ...request,
            body: JSON.stringify({
              ...service,
              name: `Bench ${'abcdefghij'[n++ % 10]} ${'klmnopqrst'[Math.floor(n / 10) % 10]}`,
            }),
          }),
        },
        { method: 'POST', path: `${env}/services`, body: `${'['.repeat(10_000)}${']'.repeat(10_000)}` },
        { method: 'GET', path: `${env}/services?limit=1&limit=2&cursor=%%%` },
        { method: 'GET', path: '/v1/audit-logs?cursor=MDAwMC0wMS0wMVQwMDowMDowMC4wMDBa' },
      ],
    });
  await load(5);
  const before = rssMb(child.pid as number);
  const result = await load(LOAD_S);
  const after = rssMb(child.pid as number);
  await sleep(IDLE_S * 1000);
  const idle = rssMb(child.pid as number);
  const report = {
    load_s: LOAD_S,
    idle_s: IDLE_S,
    connections: CONNECTIONS,
    requests: result.requests.total,
    errors: result.errors,
    rss_mb: { before, after_load: after, after_idle: idle },
    returned: idle <= before * 1.1,
  };
  fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
  fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);
  console.log(JSON.stringify(report));
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  fs.rmSync(dataDir, { recursive: true, force: true });
}

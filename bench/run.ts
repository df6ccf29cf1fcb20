/**
 * `npm run bench` (first step): every row of issue 10's table, each measured against its baseline in
 * the same run, BENCH_ROUNDS rounds (default 3) with the median, into one report,
 * bench/results/bench.json, and a Markdown table on stdout (docs/performance.md's).
 *
 * Rows:
 * - poll: GET /v1/deployments/{id} (a finished deployment, a token) with autocannon, on Postgres and
 *   on the embedded database, each round next to a node:http process sent the same request (its
 *   Authorization header too) and answering the same bytes.
 * - deploy: deployments/s end to end (BERTH_SIM_STEP_MS=0; services x deployments each, accepted
 *   through the API, awaited with waiting reads) on one server, on Postgres and embedded.
 * - scale-out: the same on Postgres with `berth serve` plus two `berth worker` processes, as a ratio
 *   to one server measured in the same round.
 * - list: GET a page of 100 of 10,000 services (Postgres; the rows are copied in SQL), p50, next to
 *   node:http sent the same request and answering the same bytes.
 * - start: `berth serve` on a fresh embedded data directory until /health answers (wall clock and the
 *   CPU seconds it used, which a shared machine's load hardly moves), and its RSS idle, next to a node
 *   process starting node:http.
 *
 * - cpu: bench/cpu.ts on each database, once a round, in a process of its own: CPU per poll next to a
 *   bare Fastify route in the same process (the hooks' cost), per list page and per deployment, and
 *   statements per each; figures a loaded machine hardly moves. The poll and list rows also report the
 *   server process's CPU per request (`berth_server_cpu_us`, `baseline_server_cpu_us`).
 *
 * Every Berth is its own process (bin/berth.js), as a user runs it; the load comes from this one.
 * Settings: BENCH_ROUNDS (3), BENCH_DURATION_S (5), BENCH_WARMUP_S (1), BENCH_CONNECTIONS (50),
 * BENCH_DEPLOY_SERVICES (100), BENCH_DEPLOY_EACH (5), BENCH_LIST_SERVICES (10000), BENCH_IDLE_S (5),
 * BENCH_CPU_DEPLOYS (200),
 * - streams: BENCH_STREAMS (1000) clients on GET /v1/events of one account (Postgres): the server's
 *   RSS and CPU per stream while they are connected and quiet, and the time from a change's request to
 *   its event reaching every one of them.
 * - log: BENCH_LOG_FOLLOWERS (100) clients following one deployment's log to its end (Postgres,
 *   BERTH_SIM_STEP_MS=200): the server's RSS and CPU per follower over the deployment, against the same
 *   deployment unfollowed in the same round, and how long after the deployment ended the last follower
 *   got its `end` event.
 * - console: bench/console.ts in a process of its own (embedded): the web console's first screens from
 *   a cold Chromium (sign-in; the services list with live status) and its bundle size.
 * - metrics: bench/metrics.ts, poll throughput with metrics on (BERTH_METRICS_BIND scraped, the service
 *   collector ticking every second over 100 services) vs off, both loaded at once (embedded).
 * - svcmetrics: bench/service-metrics.ts, the CPU one service metrics collection round costs per 100
 *   services (sim, embedded, in process).
 * - https: bench/https-ingress.ts, requests/s through the docker ingress over HTTPS (keep-alive) and full
 *   TLS handshakes/s, each against a bare node:https server with the same certificate in the same round;
 *   requests/s also driven by wrk (bench/wrk.ts) when it is installed.
 * BENCH_POSTGRES_URL (an admin connection; the run creates and drops databases of its own).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import pg from 'pg';
import { httpsIngressRows } from './https-ingress.ts';
import { median } from './median.ts';
import { metricsRows } from './metrics.ts';
import {
  BERTH_BIN,
  cpuSeconds,
  log,
  POSTGRES_ADMIN_URL,
  type Proc,
  postgresDatabase,
  spawnNode,
  waitFor,
} from './process.ts';
import { pushToLiveRows, swarmPushRows } from './push-to-live.ts';
import { BENCH_SERVICE } from './service.ts';
import { serviceMetricsRows } from './service-metrics.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPORT_FILE = path.join(HERE, 'results', 'bench.json');

function setting(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

const SETTINGS = {
  rounds: setting('BENCH_ROUNDS', 3, 1, 20),
  duration_s: setting('BENCH_DURATION_S', 5, 1, 60),
  warmup_s: setting('BENCH_WARMUP_S', 1, 0, 30),
  connections: setting('BENCH_CONNECTIONS', 50, 1, 1000),
  deploy_services: setting('BENCH_DEPLOY_SERVICES', 100, 1, 1000),
  deploy_each: setting('BENCH_DEPLOY_EACH', 5, 1, 100),
  list_services: setting('BENCH_LIST_SERVICES', 10_000, 100, 100_000),
  idle_s: setting('BENCH_IDLE_S', 5, 0, 120),
  streams: setting('BENCH_STREAMS', 1000, 1, 10_000),
  log_followers: setting('BENCH_LOG_FOLLOWERS', 100, 1, 1000),
  cpu_deploys: setting('BENCH_CPU_DEPLOYS', 200, 20, 10_000),
};

const round2 = (n: number) => Math.round(n * 100) / 100;

const cleanups: Array<() => Promise<void>> = [];

/** A berth (or baseline) process that the run's cleanup also ends. */
function run(args: string[], env: Record<string, string>): Proc {
  const proc = spawnNode(args, env);
  cleanups.push(proc.stop);
  return proc;
}

function rssMb(pid: number | undefined): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 102.4) / 10;
}

interface Berth extends Proc {
  url: string;
  token: string;
  envId: string;
  dataDir: string;
  databaseUrl?: string;
}

/** `berth serve` on a fresh data directory (and database), once its environment is available. */
async function startBerth(
  kind: 'embedded' | 'postgres',
  extra: Record<string, string> = {},
): Promise<Berth & { startMs: number; startCpuS: number }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-'));
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const database = kind === 'postgres' ? await postgresDatabase('berth_bench') : undefined;
  if (database) cleanups.push(database.drop);
  const databaseUrl = database?.url;
  const started = performance.now();
  const proc = run([BERTH_BIN, 'serve'], {
    BERTH_DATA_DIR: dataDir,
    BERTH_PORT: '0',
    BERTH_RATE_LIMIT_PER_MIN: '10000000',
    BERTH_STREAMS_PER_TOKEN: '1000000',
    BERTH_STREAMS_PER_ACCOUNT: '1000000',
    BERTH_SIM_STEP_MS: '0',
    ...(databaseUrl ? { BERTH_DATABASE_URL: databaseUrl } : {}),
    ...extra,
  });
  const url = await waitFor('berth to listen', () => {
    if (proc.child.exitCode !== null) throw new Error(`berth exited: ${proc.out()}`);
    return /listening on (http:\/\/\S+)/.exec(proc.out())?.[1];
  });
  await waitFor('berth to be healthy', async () =>
    (await fetch(`${url}/health`).catch(() => undefined))?.ok ? true : undefined,
  );
  const startMs = performance.now() - started;
  const startCpuS = cpuSeconds(proc.child.pid);
  const token = await waitFor('the first start', () => /API token:\s+([0-9a-f-]{36})/.exec(proc.out())?.[1]);
  const envId = await waitFor(
    'the first start',
    () => /environment:\s+([0-9a-f-]{36})/.exec(proc.out())?.[1],
  );
  const berth = { ...proc, url, token, envId, dataDir, databaseUrl, startMs, startCpuS };
  await waitFor('the environment to be available', async () =>
    (await call(berth, 'GET', `/v1/environments/${envId}`)).body.data.environment.state === 'available'
      ? true
      : undefined,
  );
  return berth;
}

interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: the bench reads a few fields of several JSON shapes
  body: any;
  raw: Buffer;
  headers: Headers;
}

async function call(
  berth: { url: string; token: string },
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await fetch(new URL(url, berth.url), {
    method,
    headers: {
      authorization: `Bearer ${berth.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const raw = Buffer.from(await res.arrayBuffer());
  const text = raw.toString('utf8');
  const parsed =
    text && res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : undefined;
  if (res.status >= 400) throw new Error(`${method} ${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
  return { status: res.status, body: parsed, raw, headers: res.headers };
}

let serviceNames = 0;
/** Names hold letters and spaces only: the counter in base 26. */
const letters = (n: number): string =>
  (n >= 26 ? letters(Math.floor(n / 26) - 1) : '') + String.fromCharCode(97 + (n % 26));
async function createServices(berth: Berth, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 20) {
    const batch = Array.from({ length: Math.min(20, count - i) }, () =>
      call(berth, 'POST', `/v1/environments/${berth.envId}/services`, {
        ...BENCH_SERVICE,
        name: `bench ${letters(serviceNames++)}`,
      }),
    );
    for (const reply of await Promise.all(batch)) ids.push(reply.body.data.service.id);
  }
  return ids;
}

/** Holds on the deployment with waiting reads until it is terminal; throws if it failed. */
async function finished(berth: Berth, deploymentId: string): Promise<void> {
  let etag: string | undefined;
  for (;;) {
    const reply = await call(berth, 'GET', `/v1/deployments/${deploymentId}`, undefined, {
      ...(etag ? { 'if-none-match': etag, prefer: 'wait=60' } : {}),
    });
    etag = reply.headers.get('etag') ?? undefined;
    if (reply.status === 304) continue;
    const { state, failure_reason } = reply.body.data.deployment;
    if (state === 'failed') throw new Error(`deployment ${deploymentId} failed: ${failure_reason}`);
    if (state === 'success') return;
  }
}

/**
 * Deployments per second: `each` deployments of every service accepted, then awaited, timed from the
 * first POST; and the CPU milliseconds a deployment of each process in `pids` (the server first, then
 * any workers), which the machine's load hardly moves.
 */
async function deployThroughput(
  berth: Berth,
  services: string[],
  each: number,
  pids: (number | undefined)[] = [berth.child.pid],
): Promise<{ perS: number; cpuMs: number[] }> {
  const cpuFrom = pids.map(cpuSeconds);
  const started = performance.now();
  const waits: Promise<void>[] = [];
  const accept = async (serviceId: string) => {
    for (let i = 0; i < each; i++) {
      const reply = await call(
        berth,
        'POST',
        `/v1/environments/${berth.envId}/services/${serviceId}/deploy`,
        { note: `bench ${i}` },
      );
      waits.push(finished(berth, reply.body.data.deployment_id));
    }
  };
  await Promise.all(services.map(accept));
  await Promise.all(waits);
  const count = services.length * each;
  return {
    perS: (count * 1000) / (performance.now() - started),
    cpuMs: pids.map((pid, i) => Math.round(((cpuSeconds(pid) - (cpuFrom[i] ?? 0)) * 100_000) / count) / 100),
  };
}

interface Load {
  requests_per_sec: number;
  p50_ms: number;
  p99_ms: number;
  /** CPU the server process used per request answered (microseconds): what load hardly moves. */
  server_cpu_us: number;
}

async function load(
  url: string,
  headers: Record<string, string>,
  server: number | undefined,
  connections = SETTINGS.connections,
): Promise<Load> {
  const options = { url, headers, connections };
  if (SETTINGS.warmup_s > 0) await autocannon({ ...options, duration: SETTINGS.warmup_s });
  const cpuFrom = cpuSeconds(server);
  const result = await autocannon({ ...options, duration: SETTINGS.duration_s });
  const answered = Math.max(1, result['2xx']);
  if (result.errors > 0 || result.timeouts > 0 || result.non2xx > 0) {
    throw new Error(`${url}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx`);
  }
  return {
    requests_per_sec: result.requests.average,
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    server_cpu_us: ((cpuSeconds(server) - cpuFrom) * 1e6) / answered,
  };
}

const TICK_SHAPE = new URL('../src/tick-shape.ts', import.meta.url).href;

/**
 * A node:http process answering every request with `body` (the same bytes and content type as Berth).
 * Compared under load, it keeps a tick object as `berth serve` does (src/tick-shape.ts): without, it
 * answered some rounds in V8's slow nextTick state, ~3 us a request dearer (docs/performance.md,
 * "nextTick's slow state"). The start row times a bare one.
 */
async function baseline(body: Buffer, keepTicks: boolean): Promise<Proc & { url: string; startMs: number }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-baseline-'));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'body.json');
  fs.writeFileSync(file, body);
  const script = `
    const body = require('node:fs').readFileSync(${JSON.stringify(file)});
    const server = require('node:http').createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
      res.end(body);
    });
    const listen = () =>
      server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
    ${keepTicks ? `import(${JSON.stringify(TICK_SHAPE)}).then(({ keepTickShape }) => { keepTickShape(); listen(); });` : 'listen();'}`;
  const started = performance.now();
  const proc = run(['-e', script], {});
  const url = await waitFor(
    'the baseline to listen',
    () => /listening on (http:\/\/\S+)/.exec(proc.out())?.[1],
  );
  await waitFor('the baseline to answer', async () =>
    (await fetch(url).catch(() => undefined))?.ok ? true : undefined,
  );
  return Object.assign(proc, { url, startMs: performance.now() - started });
}

/** Rounds of load on `url`, each right after the same load on node:http answering `sample`'s bytes. */
async function againstBaseline(
  berth: Berth,
  url: string,
  sample: Reply,
  connections = SETTINGS.connections,
): Promise<Record<string, number>[]> {
  const base = await baseline(sample.raw, true);
  // node:http is sent the same request, Authorization header included (its parsing is ~0.7 us).
  const headers = { authorization: `Bearer ${berth.token}` };
  const rounds: Record<string, number>[] = [];
  for (let r = 0; r < SETTINGS.rounds; r++) {
    const b = await load(base.url, headers, base.child.pid, connections);
    const m = await load(url, headers, berth.child.pid, connections);
    rounds.push({
      berth_rps: m.requests_per_sec,
      berth_p50_ms: m.p50_ms,
      berth_p99_ms: m.p99_ms,
      baseline_rps: b.requests_per_sec,
      baseline_p50_ms: b.p50_ms,
      baseline_p99_ms: b.p99_ms,
      ratio_rps: m.requests_per_sec / b.requests_per_sec,
      ratio_p99: m.p99_ms / Math.max(1, b.p99_ms),
      berth_server_cpu_us: m.server_cpu_us,
      baseline_server_cpu_us: b.server_cpu_us,
      load_average_1m: os.loadavg()[0] as number,
    });
  }
  await base.stop();
  return rounds;
}

interface Row {
  measure: string;
  target: string;
  /** What this row was measured with (BENCH_ROWS keeps rows of earlier runs). */
  settings: typeof SETTINGS;
  rounds: Record<string, number>[];
  median: Record<string, number>;
  met: boolean;
}

const rows: Row[] = [];

function addRow(
  measure: string,
  target: string,
  rounds: Record<string, number>[],
  met: (m: Record<string, number>) => boolean,
) {
  const keys = Object.keys(rounds[0] ?? {});
  const med = Object.fromEntries(keys.map((k) => [k, round2(median(rounds.map((r) => r[k] as number)))]));
  rows.push({ measure, target, settings: { ...SETTINGS }, rounds, median: med, met: met(med) });
  log(`${measure}: ${JSON.stringify(med)}`);
}

async function pollRows(): Promise<void> {
  for (const kind of ['postgres', 'embedded'] as const) {
    log(`poll, ${kind}: starting berth`);
    const berth = await startBerth(kind, { BERTH_SIM_STEP_MS: '10' });
    const [serviceId] = await createServices(berth, 1);
    const deployed = await call(
      berth,
      'POST',
      `/v1/environments/${berth.envId}/services/${serviceId}/deploy`,
      {},
    );
    const deploymentId = deployed.body.data.deployment_id;
    await finished(berth, deploymentId);
    const url = `${berth.url}/v1/deployments/${deploymentId}`;
    const rounds = await againstBaseline(berth, url, await call(berth, 'GET', url));
    await berth.stop();
    addRow(
      `poll GET /v1/deployments/{id}, ${kind}`,
      '>= 0.75x of node:http, p99 <= 2x baseline (issue 31)',
      rounds,
      (m) => (m.ratio_rps as number) >= 0.75 && (m.ratio_p99 as number) <= 2,
    );
  }
}

async function deployRows(): Promise<void> {
  const { deploy_services: services, deploy_each: each } = SETTINGS;
  for (const kind of ['postgres', 'embedded'] as const) {
    log(`deploy, ${kind}: ${services} services x ${each}`);
    const berth = await startBerth(kind);
    const rounds: Record<string, number>[] = [];
    for (let r = 0; r < SETTINGS.rounds; r++) {
      const ids = await createServices(berth, services);
      const { perS, cpuMs } = await deployThroughput(berth, ids, each);
      rounds.push({ deployments_per_s: perS, server_cpu_ms_per_deployment: cpuMs[0] ?? 0 });
    }
    await berth.stop();
    addRow(
      `deployments/s end to end, ${kind}, one server`,
      kind === 'postgres' ? '>= 250' : '>= 120',
      rounds,
      (m) =>
        kind === 'postgres' ? (m.deployments_per_s as number) >= 250 : (m.deployments_per_s as number) >= 120,
    );
  }
}

async function scaleOutRow(): Promise<void> {
  const { deploy_services: services, deploy_each: each } = SETTINGS;
  log('scale-out: one server, then a server with two berth worker processes');
  const single = await startBerth('postgres');
  const scaled = await startBerth('postgres');
  const workers: (number | undefined)[] = [];
  for (let i = 0; i < 2; i++) {
    const worker = run([BERTH_BIN, 'worker'], {
      BERTH_DATABASE_URL: scaled.databaseUrl as string,
      // The server's directory: its master key file.
      BERTH_DATA_DIR: scaled.dataDir,
      BERTH_SIM_STEP_MS: '0',
      BERTH_LOG_LEVEL: 'info',
    });
    await waitFor('berth worker to start', () => (/worker started/.test(worker.out()) ? true : undefined));
    workers.push(worker.child.pid);
  }
  const rounds: Record<string, number>[] = [];
  for (let r = 0; r < SETTINGS.rounds; r++) {
    const one = await deployThroughput(single, await createServices(single, services), each);
    const three = await deployThroughput(scaled, await createServices(scaled, services), each, [
      scaled.child.pid,
      ...workers,
    ]);
    rounds.push({
      one_server_per_s: one.perS,
      server_and_2_workers_per_s: three.perS,
      ratio: three.perS / one.perS,
      // CPU ms a deployment: the lone server's, then the server's and each worker's beside it.
      one_server_cpu_ms: one.cpuMs[0] ?? 0,
      scaled_server_cpu_ms: three.cpuMs[0] ?? 0,
      worker_cpu_ms: three.cpuMs.slice(1).reduce((a, b) => a + b, 0),
    });
  }
  addRow(
    'server + 2 berth worker vs one server, Postgres',
    '>= 1.5x',
    rounds,
    (m) => (m.ratio as number) >= 1.5,
  );
}

async function listRow(): Promise<void> {
  log(`list: ${SETTINGS.list_services} services`);
  const berth = await startBerth('postgres');
  const [first] = await createServices(berth, 1);
  const db = new pg.Client({ connectionString: berth.databaseUrl });
  await db.connect();
  const columns = (
    await db.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'services'
       ORDER BY ordinal_position`,
    )
  ).rows.map((r) => r.column_name);
  const copied: Record<string, string> = {
    id: 'gen_random_uuid()',
    name: `name || ' ' || i`,
    subdomain: `subdomain || '-' || i`,
    created_at: `created_at + i * interval '1 millisecond'`,
  };
  await db.query(
    `INSERT INTO services (${columns.map((c) => `"${c}"`).join(', ')})
     SELECT ${columns.map((c) => copied[c] ?? `"${c}"`).join(', ')}
     FROM services, generate_series(1, $2::int) AS i WHERE services.id = $1`,
    [first, SETTINGS.list_services - 1],
  );
  await db.query('ANALYZE services');
  await db.end();
  const url = `${berth.url}/v1/environments/${berth.envId}/services?limit=100`;
  const sample = await call(berth, 'GET', url);
  if (sample.body.data.services.length !== 100) throw new Error('the list page should hold 100 services');
  // A latency: one client asking again and again, so that p50 is the request's own time, not a queue's.
  const rounds = await againstBaseline(berth, url, sample, 1);
  await berth.stop();
  addRow(
    `list services, page of 100 of ${SETTINGS.list_services}, Postgres, one connection`,
    'p50 <= 5 ms',
    rounds,
    (m) => (m.berth_p50_ms as number) <= 5,
  );
}

async function startRow(): Promise<void> {
  const rounds: Record<string, number>[] = [];
  for (let r = 0; r < SETTINGS.rounds; r++) {
    log(`start, embedded: round ${r + 1}`);
    const base = await baseline(Buffer.from('{}'), false);
    const baseStart = base.startMs;
    const baseRss = rssMb(base.child.pid);
    const baseCpu = cpuSeconds(base.child.pid);
    await base.stop();
    const berth = await startBerth('embedded');
    await sleep(SETTINGS.idle_s * 1000);
    rounds.push({
      start_s: berth.startMs / 1000,
      start_cpu_s: berth.startCpuS,
      rss_idle_mb: rssMb(berth.child.pid),
      baseline_start_s: baseStart / 1000,
      baseline_cpu_s: baseCpu,
      baseline_rss_mb: baseRss,
      load_average_1m: os.loadavg()[0] as number,
    });
    await berth.stop();
  }
  addRow(
    'fresh start to healthy, embedded (RSS after idle)',
    '<= 3 s, RSS <= 250 MB',
    rounds,
    (m) => (m.start_s as number) <= 3 && (m.rss_idle_mb as number) <= 250,
  );
}

/**
 * bench/cpu.ts, once per round and database, in a process of its own: CPU per poll against bare
 * Fastify in the same process, per list page and per deployment, and statements per each.
 */
async function cpuRows(): Promise<void> {
  for (const kind of ['postgres', 'embedded'] as const) {
    const rounds: Record<string, number>[] = [];
    for (let r = 0; r < SETTINGS.rounds; r++) {
      log(`cpu, ${kind}: round ${r + 1}`);
      const proc = run([path.join(HERE, 'cpu.ts')], {
        BERTH_TEST_DATABASE: kind,
        BERTH_TEST_POSTGRES_URL: POSTGRES_ADMIN_URL,
        BENCH_LIST_SERVICES: String(SETTINGS.list_services),
        BENCH_CPU_DEPLOYS: String(SETTINGS.cpu_deploys),
      });
      const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
      const line = proc
        .out()
        .split('\n')
        .find((l) => l.startsWith('{"database"'));
      if (code !== 0 || !line) throw new Error(`bench/cpu.ts failed: ${proc.out().slice(-2000)}`);
      const figures = JSON.parse(line) as Record<string, unknown>;
      rounds.push(
        Object.fromEntries(
          Object.entries(figures).filter((entry): entry is [string, number] => typeof entry[1] === 'number'),
        ),
      );
    }
    addRow(
      `CPU per poll (vs bare Fastify, same process), list page and deployment, ${kind}`,
      'poll: bare Fastify + a few us (<= 5)',
      rounds,
      (m) => (m.poll_added_cpu_us as number) <= 5,
    );
  }
}

/** bench/console.ts, in a process of its own: its rounds are this row's. */
async function consoleRow(): Promise<void> {
  log('console: first screens from a cold browser');
  const proc = run([path.join(HERE, 'console.ts')], { BENCH_ROUNDS: String(SETTINGS.rounds) });
  const code = await new Promise<number | null>((resolve) => proc.child.once('exit', resolve));
  const line = proc
    .out()
    .split('\n')
    .find((l) => l.startsWith('{"benchmark"'));
  if (code !== 0 || !line) throw new Error(`bench/console.ts failed: ${proc.out().slice(-2000)}`);
  addRow(
    'console first screen interactive, cold Chromium (sign-in; services list), bundle KB',
    '<= 1000 ms each; bundle size reported',
    (JSON.parse(line) as { rounds: Record<string, number>[] }).rounds,
    (m) => (m.sign_in_ms as number) <= 1000 && (m.services_ms as number) <= 1000,
  );
}

/**
 * A server-sent events client on node:http (cheap enough to hold thousands in this process): resolves
 * once the answer's headers arrived; `onText` sees each chunk.
 */
function openStream(
  berth: Berth,
  path: string,
  agent: http.Agent,
  onText: (text: string) => void,
): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      new URL(path, berth.url),
      { agent, headers: { authorization: `Bearer ${berth.token}`, accept: 'text/event-stream' } },
      (response) => {
        if (response.statusCode !== 200) reject(new Error(`${path}: HTTP ${response.statusCode}`));
        response.setEncoding('utf8');
        response.on('data', onText);
        response.on('error', () => undefined);
        resolve(request);
      },
    );
    request.on('error', reject);
  });
}

async function streamsRow(): Promise<void> {
  const count = SETTINGS.streams;
  log(`streams: ${count} clients on GET /v1/events, Postgres`);
  const berth = await startBerth('postgres');
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const pid = berth.child.pid;
  // berth serve collects garbage after 10 s without a request: both RSS readings come after one.
  const collected = () => sleep(12_000);
  await collected();
  const rssBefore = rssMb(pid);
  const seen = new Array<string>(count).fill('');
  const streams: http.ClientRequest[] = [];
  for (let i = 0; i < count; i += 100) {
    const batch = Array.from({ length: Math.min(100, count - i) }, (_, j) =>
      openStream(berth, '/v1/events', agent, (text) => {
        seen[i + j] += text;
      }),
    );
    streams.push(...(await Promise.all(batch)));
  }
  await collected();
  const rssConnected = rssMb(pid);
  const cpuQuietFrom = cpuSeconds(pid);
  const quietS = 10;
  await sleep(quietS * 1000);
  const cpuQuiet = cpuSeconds(pid) - cpuQuietFrom;
  const rounds: Record<string, number>[] = [];
  for (let r = 0; r < SETTINGS.rounds; r++) {
    const marker = `BENCH_MARK_${r}`;
    const cpuFrom = cpuSeconds(pid);
    const sent = performance.now();
    await call(berth, 'PUT', `/v1/environments/${berth.envId}/secrets`, {
      secrets: [{ key: marker, value: 'x' }],
    });
    await waitFor(`the event to reach all ${count} streams`, () =>
      seen.every((text) => text.includes(marker)) ? true : undefined,
    );
    rounds.push({
      all_streams_ms: performance.now() - sent,
      server_cpu_ms_per_event: (cpuSeconds(pid) - cpuFrom) * 1000,
      rss_per_stream_kb: ((rssConnected - rssBefore) * 1024) / count,
      idle_cpu_ms_per_stream_per_min: (cpuQuiet * 1000 * (60 / quietS)) / count,
      load_average_1m: os.loadavg()[0] as number,
    });
  }
  for (const stream of streams) stream.destroy();
  agent.destroy();
  await berth.stop();
  addRow(
    `${count} GET /v1/events streams, Postgres: one event to all`,
    'measured (issue 13): no target',
    rounds,
    () => true,
  );
}

async function logFollowRow(): Promise<void> {
  const followers = SETTINGS.log_followers;
  log(`log: ${followers} followers of a deployment's log, Postgres`);
  const berth = await startBerth('postgres', { BERTH_SIM_STEP_MS: '200' });
  const pid = berth.child.pid;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  const [serviceId] = await createServices(berth, 1);
  const deploy = async () =>
    (await call(berth, 'POST', `/v1/environments/${berth.envId}/services/${serviceId}/deploy`, {})).body.data
      .deployment_id as string;
  const rounds: Record<string, number>[] = [];
  for (let r = 0; r < SETTINGS.rounds; r++) {
    // The same deployment unfollowed: what the deployment itself costs the server.
    let cpuFrom = cpuSeconds(pid);
    await finished(berth, await deploy());
    const alone = cpuSeconds(pid) - cpuFrom;
    await sleep(500);
    const rssBefore = rssMb(pid);
    cpuFrom = cpuSeconds(pid);
    const id = await deploy();
    const ends: number[] = [];
    let lines = 0;
    const followed: Array<{ connected: Promise<unknown>; ended: Promise<void> }> = Array.from(
      { length: followers },
      () => {
        let text = '';
        let done = false;
        let ended: () => void = () => undefined;
        const end = new Promise<void>((resolve) => {
          ended = resolve;
        });
        const connected = openStream(berth, `/v1/deployments/${id}/logs?follow=true`, agent, (chunk) => {
          text += chunk;
          if (!done && text.includes('event: end')) {
            done = true;
            ends.push(Date.now());
            lines += text.split('event: line').length - 1;
            ended();
          }
        }).then((request) => request.on('close', ended));
        return { connected, ended: end };
      },
    );
    // Memory while every follower is connected and the deployment runs.
    await Promise.all(followed.map((f) => f.connected));
    const rssDuring = rssMb(pid);
    await Promise.all(followed.map((f) => f.ended));
    const cpuFollowed = cpuSeconds(pid) - cpuFrom;
    await finished(berth, id);
    const endedAt = Date.parse(
      (await call(berth, 'GET', `/v1/deployments/${id}`)).body.data.deployment.updated_at,
    );
    rounds.push({
      cpu_ms_per_follower: ((cpuFollowed - alone) * 1000) / followers,
      rss_per_follower_kb: ((rssDuring - rssBefore) * 1024) / followers,
      lines_per_follower: lines / followers,
      last_end_after_ms: Math.max(...ends) - endedAt,
      load_average_1m: os.loadavg()[0] as number,
    });
  }
  agent.destroy();
  await berth.stop();
  addRow(
    `${followers} followers of one deployment's log, Postgres`,
    'measured (issue 13): no target',
    rounds,
    () => true,
  );
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: HERE, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const all = {
    poll: pollRows,
    deploy: deployRows,
    scaleout: scaleOutRow,
    list: listRow,
    start: startRow,
    cpu: cpuRows,
    streams: streamsRow,
    log: logFollowRow,
    console: consoleRow,
    push: () => pushToLiveRows(addRow),
    swarmpush: () => swarmPushRows(addRow),
    metrics: () => metricsRows(addRow),
    svcmetrics: () => serviceMetricsRows(addRow),
    https: () => httpsIngressRows(addRow),
  };
  // BENCH_ROWS=list,start measures those rows again; the report keeps the other rows of the last run.
  const only = process.env.BENCH_ROWS?.split(',').map((r) => r.trim());
  for (const [name, measure] of Object.entries(all)) if (!only || only.includes(name)) await measure();
  if (only && fs.existsSync(REPORT_FILE)) {
    const kept = (JSON.parse(fs.readFileSync(REPORT_FILE, 'utf8')).rows as Row[]).filter(
      (row) => !rows.some((r) => r.measure.split(',')[0] === row.measure.split(',')[0]),
    );
    rows.unshift(...kept);
  }
  const report = {
    benchmark: 'issue 10',
    date: new Date().toISOString(),
    commit: gitCommit(),
    node: process.version,
    machine: {
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model ?? 'unknown',
      memory_bytes: os.totalmem(),
    },
    settings: SETTINGS,
    rows,
    wall_clock_s: Math.round((Date.now() - started) / 1000),
  };
  fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
  fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);
  console.log('| measure | median of rounds | target | met |\n|---|---|---|---|');
  for (const row of rows) {
    const values = Object.entries(row.median)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    console.log(`| ${row.measure} | ${values} | ${row.target} | ${row.met ? 'yes' : 'no'} |`);
  }
  console.log(`\nreport: ${path.relative(process.cwd(), REPORT_FILE)} (${report.wall_clock_s} s)`);
}

async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.reverse().splice(0)) {
    try {
      await cleanup();
    } catch (error) {
      console.error(`[bench] cleanup failed: ${(error as Error).message}`);
      process.exitCode = 1;
    }
  }
}

// Stopped early: the servers, data directories and databases go too.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    cleanUp().finally(() => process.exit(130));
  });
}

try {
  await main();
} catch (error) {
  console.error(`[bench] FAILED: ${(error as Error).stack ?? error}`);
  process.exitCode = 1;
} finally {
  await cleanUp();
}

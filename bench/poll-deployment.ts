/**
 * `npm run bench`: clients polling GET /v1/deployments/{id}, on the embedded database (PGlite) and on
 * Postgres, next to a plain node:http server answering the same bytes, measured in the same run. Prints
 * requests/s and p99 with their ratios to that baseline, and writes bench/results/poll-deployment.json.
 *
 * Settings (environment): BENCH_DURATION_S (default 15) and BENCH_WARMUP_S (3) per target,
 * BENCH_CONNECTIONS (50), BENCH_POSTGRES_URL (postgres://postgres@127.0.0.1:5432/postgres, an admin
 * connection used to create and drop a database of the run's own).
 *
 * Berth runs in this process as `berth serve` would (API and workers); the load comes from an autocannon
 * worker thread so that the load generator does not share the server's event loop.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { startServer } from '../src/runtime.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPORT_FILE = path.join(HERE, 'results', 'poll-deployment.json');

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
  connections: setting('BENCH_CONNECTIONS', 50, 1, 1000),
  duration_s: setting('BENCH_DURATION_S', 15, 1, 60),
  warmup_s: setting('BENCH_WARMUP_S', 3, 0, 30),
  pipelining: 1,
  load_generator_threads: 1,
  sim_step_ms: 10,
};
const POSTGRES_ADMIN_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const SERVICE = {
  name: 'Bench App',
  source: 'docker_image',
  type: 'web',
  port: 8080,
  replica_count: 1,
  cpu_count_min: 0.5,
  memory_mb_min: 256,
  docker_image: 'acme/bench',
};

/** What the benchmark drives: a URL answering GET with 2xx, the headers to send, and how to let go. */
interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  close(): Promise<void>;
}

interface Measured {
  requests_per_sec: number;
  p99_ms: number;
  p50_ms: number;
  max_ms: number;
  requests_total: number;
  response_bytes: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** Checks until `check` returns a value, fails at once when it throws, and fails after the deadline. */
async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: the bench reads a few fields of several JSON shapes
  body: any;
  raw: Buffer;
  contentType: string;
}

async function call(
  base: string,
  token: string,
  method: string,
  url: string,
  body?: unknown,
): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(new URL(url, base), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const raw = Buffer.from(await res.arrayBuffer());
  const contentType = res.headers.get('content-type') ?? '';
  const parsed = contentType.startsWith('application/json') ? JSON.parse(raw.toString('utf8')) : undefined;
  return { status: res.status, body: parsed, raw, contentType };
}

function expectOk(reply: Reply, what: string): Reply {
  if (reply.status < 200 || reply.status > 299) {
    throw new Error(`${what}: HTTP ${reply.status} ${reply.raw.toString('utf8').slice(0, 500)}`);
  }
  return reply;
}

/** A fresh Postgres database of this run's own, dropped WITH (FORCE) by `drop`. */
async function createPostgresDatabase(): Promise<{ url: string; version: string; drop(): Promise<void> }> {
  const name = `berth_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `cannot reach Postgres at ${POSTGRES_ADMIN_URL} (set BENCH_POSTGRES_URL): ${(error as Error).message}`,
    );
  }
  let version: string;
  try {
    version =
      (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? '';
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    version,
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * A listening Berth on a fresh data directory (and the given database, else PGlite), with one docker_image
 * service deployed to success; the target is GET /v1/deployments/{that deployment}.
 */
async function startBerth(
  name: string,
  databaseUrl: string | undefined,
): Promise<Target & { sample: Reply }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-'));
  const removeDataDir = async () => fs.rmSync(dataDir, { recursive: true, force: true });
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(
      {
        ...loadConfig({}),
        host: '127.0.0.1',
        port: 0,
        dataDir,
        databaseUrl,
        rateLimitPerMin: 100_000_000,
        logLevel: 'warn',
        providerEnv: { BERTH_SIM_STEP_MS: String(SETTINGS.sim_step_ms) },
      },
      { workers: true },
    );
  } catch (error) {
    await removeDataDir();
    throw error;
  }
  const close = async () => {
    await server.close();
    await removeDataDir();
  };
  try {
    const first = server.firstStart;
    if (!first) throw new Error(`${name}: the fresh data directory should have seen a first start`);
    const { apiToken: token, environmentId: envId } = first;
    const base = server.url;

    await waitFor(`${name}: the default environment to be available`, async () => {
      const env = expectOk(await call(base, token, 'GET', `/v1/environments/${envId}`), 'get environment');
      const state = env.body.data.environment.state;
      if (state === 'failed') throw new Error(`${name}: the default environment failed to provision`);
      return state === 'available' ? true : undefined;
    });
    const service = expectOk(
      await call(base, token, 'POST', `/v1/environments/${envId}/services`, SERVICE),
      'create service',
    );
    const serviceId: string = service.body.data.service.id;
    const deployed = expectOk(
      await call(base, token, 'POST', `/v1/environments/${envId}/services/${serviceId}/deploy`, {}),
      'deploy',
    );
    const deploymentId: string = deployed.body.data.deployment_id;
    const url = `${base}/v1/deployments/${deploymentId}`;
    const sample = await waitFor(`${name}: the deployment to succeed`, async () => {
      const reply = expectOk(await call(base, token, 'GET', url), 'get deployment');
      const deployment = reply.body.data.deployment;
      if (deployment.state === 'failed') {
        throw new Error(`${name}: the deployment failed: ${deployment.failure_reason}`);
      }
      return deployment.state === 'success' ? reply : undefined;
    });
    return { name, url, headers: { authorization: `Bearer ${token}` }, close, sample };
  } catch (error) {
    await close();
    throw error;
  }
}

/** node:http answering every request with the same status, content type and bytes. */
async function startBaseline(sample: Reply): Promise<Target> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': sample.contentType, 'content-length': sample.raw.length });
    res.end(sample.raw);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    name: 'baseline (node:http)',
    url: `http://127.0.0.1:${port}/v1/deployments/baseline`,
    headers: {},
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function checkClean(target: string, phase: string, result: Result): void {
  const problems: string[] = [];
  if (result.errors > 0) problems.push(`${result.errors} errors`);
  if (result.timeouts > 0) problems.push(`${result.timeouts} timeouts`);
  if (result.non2xx > 0) {
    const codes = Object.entries(result.statusCodeStats)
      .map(([code, { count }]) => `${code}×${count}`)
      .join(', ');
    problems.push(`${result.non2xx} non-2xx responses (${codes})`);
  }
  if (result['2xx'] === 0) problems.push('no 2xx response at all');
  if (problems.length > 0) throw new Error(`${target} (${phase}): ${problems.join('; ')}`);
}

async function measure(target: Target, responseBytes: number): Promise<Measured> {
  const options = {
    url: target.url,
    headers: target.headers,
    connections: SETTINGS.connections,
    pipelining: SETTINGS.pipelining,
    workers: SETTINGS.load_generator_threads,
  };
  if (SETTINGS.warmup_s > 0) {
    log(`${target.name}: warm-up ${SETTINGS.warmup_s} s (discarded)`);
    checkClean(target.name, 'warm-up', await autocannon({ ...options, duration: SETTINGS.warmup_s }));
  }
  log(`${target.name}: ${SETTINGS.duration_s} s, ${SETTINGS.connections} connections`);
  const result = await autocannon({ ...options, duration: SETTINGS.duration_s });
  checkClean(target.name, 'measured run', result);
  return {
    requests_per_sec: result.requests.average,
    p99_ms: result.latency.p99,
    p50_ms: result.latency.p50,
    max_ms: result.latency.max,
    requests_total: result['2xx'],
    response_bytes: responseBytes,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

function ratio(value: number, base: number): number | null {
  return base > 0 ? Number((value / base).toFixed(3)) : null;
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: HERE, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

function printTable(rows: Array<{ target: string } & Measured & Ratios>): void {
  const fmt = (n: number | null, digits: number) => (n === null ? 'n/a' : n.toFixed(digits));
  const lines = [
    ['target', 'req/s', 'p50 ms', 'p99 ms', 'req/s vs baseline', 'p99 vs baseline'],
    ...rows.map((r) => [
      r.target,
      fmt(r.requests_per_sec, 0),
      fmt(r.p50_ms, 0),
      fmt(r.p99_ms, 0),
      `${fmt(r.ratio_rps_vs_baseline, 3)}×`,
      `${fmt(r.ratio_p99_vs_baseline, 2)}×`,
    ]),
  ];
  const widths = lines[0]?.map((_, i) => Math.max(...lines.map((line) => (line[i] ?? '').length))) ?? [];
  const render = (line: string[]) =>
    line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join('  ');
  console.log(render(lines[0] ?? []));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines.slice(1)) console.log(render(line));
}

interface Ratios {
  ratio_rps_vs_baseline: number | null;
  ratio_p99_vs_baseline: number | null;
}

async function main(cleanups: Array<() => Promise<void>>): Promise<void> {
  const startedAt = Date.now();

  log('starting Berth on PGlite');
  const pglite = await startBerth('berth (PGlite)', undefined);
  cleanups.push(pglite.close);
  const sample = pglite.sample;

  const baseline = await startBaseline(sample);
  cleanups.push(baseline.close);
  const baselineResult = await measure(baseline, sample.raw.length);
  await cleanups.pop()?.();

  const pgliteResult = await measure(pglite, sample.raw.length);
  await cleanups.pop()?.();

  log('starting Berth on Postgres');
  const database = await createPostgresDatabase();
  cleanups.push(database.drop);
  const postgres = await startBerth('berth (Postgres)', database.url);
  cleanups.push(postgres.close);
  const postgresResult = await measure(postgres, postgres.sample.raw.length);
  await cleanups.pop()?.();
  await cleanups.pop()?.();

  const measured = { baseline: baselineResult, pglite: pgliteResult, postgres: postgresResult };
  const base = baselineResult;
  const targets: Record<string, Measured & Ratios> = {};
  for (const [name, m] of Object.entries(measured)) {
    targets[name] = {
      ...m,
      ratio_rps_vs_baseline: ratio(m.requests_per_sec, base.requests_per_sec),
      ratio_p99_vs_baseline: ratio(m.p99_ms, base.p99_ms),
    };
  }

  const report = {
    benchmark: 'poll-deployment',
    description:
      'Clients polling GET /v1/deployments/{id} with a bearer token, against a node:http server answering ' +
      'the same bytes in the same run. Ratios are target / baseline.',
    date: new Date().toISOString(),
    commit: gitCommit(),
    node: process.version,
    machine: {
      platform: `${os.platform()} ${os.release()} ${os.arch()}`,
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model ?? 'unknown',
      total_memory_bytes: os.totalmem(),
    },
    postgres_server_version: database.version,
    settings: { ...SETTINGS, endpoint: 'GET /v1/deployments/{id}' },
    targets,
    wall_clock_s: Math.round((Date.now() - startedAt) / 1000),
  };
  fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
  fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);

  console.log(
    `\nGET /v1/deployments/{id}: ${SETTINGS.connections} connections, ${SETTINGS.duration_s} s per target ` +
      `after ${SETTINGS.warmup_s} s warm-up; ${os.cpus().length} CPUs, Node ${process.version}\n`,
  );
  printTable(
    Object.entries(targets).map(([name, t]) => ({
      target:
        name === 'baseline' ? 'baseline (node:http)' : `berth (${name === 'pglite' ? 'PGlite' : 'Postgres'})`,
      ...t,
    })),
  );
  console.log(`\nreport: ${path.relative(process.cwd(), REPORT_FILE)} (${report.wall_clock_s} s in all)`);
}

const cleanups: Array<() => Promise<void>> = [];
try {
  await main(cleanups);
} catch (error) {
  console.error(`[bench] FAILED: ${(error as Error).stack ?? error}`);
  process.exitCode = 1;
} finally {
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      console.error(`[bench] cleanup failed: ${(error as Error).message}`);
      process.exitCode = 1;
    }
  }
}

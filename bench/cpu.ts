/**
 * CPU work per request and per deployment, in process: figures a shared machine's load hardly moves
 * (CPU time from process.cpuUsage, statements counted), where the wall-clock rows of bench/run.ts need
 * a quiet machine. BERTH_TEST_DATABASE picks the database (embedded by default). Prints one JSON line;
 * `bench/run.ts` (row `cpu`) runs it for both databases.
 *
 * - poll: a served-from-cache GET /v1/deployments/{id} next to a bare Fastify route answering the same
 *   bytes through the same response schema, in the same run: what Berth's hooks, auth, rate limit and
 *   read cache add to the framework; and next to node:http answering the same bytes, what the
 *   framework itself costs. Kept polls are answered ahead of the router (src/api/fast-polls.ts;
 *   `poll_fast_share` of them were); `poll_berth_usual_path_cpu_us` is the same polls with that off. The minimum over BENCH_HOOK_ROUNDS rounds of BENCH_HOOK_REQUESTS
 *   requests each. Both listen on loopback and the client (node:http, keep-alive,
 * BENCH_HOOK_CONCURRENCY requests at a time) runs in this process, so both figures include the same
 * client work and their difference is Berth's. Not `app.inject`: light-my-request keeps about 10 KB
 * per request on Node 24, and the growing heap's collections then dominate the figures. The database is BERTH_TEST_DATABASE's (embedded by default; on Postgres the rate-limit
 * window is counted there). Prints one JSON line; `bench/run.ts` (row `hooks`) runs it for both.
 */
import fs from 'node:fs';
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { conditionalResponses } from '../src/api/plugins/conditional-reads.ts';
import { Envelope } from '../src/api/schemas/common.ts';
import { Deployment } from '../src/api/schemas/deployments.ts';
import { startWorker } from '../src/runtime.ts';
import { type Db, DEFAULT_POOL_SIZE } from '../src/store/database.ts';
import { TEST_DATABASE } from '../test/helpers/database.ts';
import { startHarness } from '../test/helpers/harness.ts';
import { pollUntil } from '../test/helpers/poll.ts';
import { BENCH_SERVICE } from './service.ts';

const ROUNDS = Number(process.env.BENCH_HOOK_ROUNDS ?? 15);
const REQUESTS = Number(process.env.BENCH_HOOK_REQUESTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_HOOK_CONCURRENCY ?? 10);
const LIST_SERVICES = Number(process.env.BENCH_LIST_SERVICES ?? 10_000);
const DEPLOYS = Number(process.env.BENCH_CPU_DEPLOYS ?? 200);
const round1 = (n: number) => Math.round(n * 10) / 10;
const cpuMs = (from: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(from);
  return (used.user + used.system) / 1000;
};

/** CPU ticks (1/100 s) of each Postgres server process of this database (same machine). */
async function postgresTicks(db: Db): Promise<Map<number, number>> {
  const ticks = new Map<number, number>();
  if (TEST_DATABASE !== 'postgres') return ticks;
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity WHERE datname = current_database()`.execute(db);
  for (const { pid } of rows) {
    try {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ticks.set(pid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // A backend that ended meanwhile.
    }
  }
  return ticks;
}

/**
 * CPU seconds the database's server processes used since `from`: all of a process started since (a
 * connection the pool opened meanwhile); one that ended meanwhile is not counted.
 */
async function postgresCpuS(db: Db, from: Map<number, number>): Promise<number> {
  let ticks = 0;
  for (const [pid, now] of await postgresTicks(db)) ticks += now - (from.get(pid) ?? 0);
  return ticks / 100;
}

/**
 * Opens the pool's connections (the harness's store has the default number) before a measurement: one
 * opened during it would count its start (or, read only at both ends, none of its work).
 */
async function openPool(db: Db): Promise<void> {
  if (TEST_DATABASE !== 'postgres') return;
  await Promise.all(Array.from({ length: DEFAULT_POOL_SIZE }, () => sql`SELECT pg_sleep(0.05)`.execute(db)));
}

type Get = () => Promise<number>;
const agents: http.Agent[] = [];

/** A Fastify app listening on a port of its own, as a node:http server. */
async function listening(app: FastifyInstance): Promise<http.Server> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return app.server;
}

/** GETs of `path` on `server`'s port, over kept-alive connections; each resolves to the status. */
function getter(server: http.Server, path: string, headers: Record<string, string>): Get {
  const { port } = server.address() as AddressInfo;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  agents.push(agent);
  return () =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        })
        .on('error', reject);
    });
}

/** CPU microseconds per request: the cheapest of ROUNDS rounds. */
async function cpuPerRequest(get: Get): Promise<number> {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    const from = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i += CONCURRENCY) {
      const statuses = await Promise.all(Array.from({ length: CONCURRENCY }, get));
      for (const status of statuses) if (status !== 200) throw new Error(`HTTP ${status}`);
    }
    const used = process.cpuUsage(from);
    best = Math.min(best, (used.user + used.system) / REQUESTS);
  }
  return best;
}

/**
 * BENCH_CPU_PROFILE=<file>: a V8 CPU profile of the deploy part alone (this process: the API and the
 * worker), for `bench/profile-summary.ts`.
 */
async function startProfile(): Promise<{ stop(): Promise<void> } | undefined> {
  const file = process.env.BENCH_CPU_PROFILE;
  if (!file) return undefined;
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop() {
      const { profile } = await session.post('Profiler.stop');
      fs.writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

const h = await startHarness({
  // Errors only: under load a lease renewal may come late, and the databases are dropped at the end.
  logLevel: 'error',
  rateLimitPerMin: 100_000_000,
  jobLeaseMs: 15_000,
  providerEnv: { BERTH_SIM_STEP_MS: '0' },
});
try {
  const t = await h.tenant();
  const auth = { token: t.token };
  const services: string[] = [];
  for (let i = 0; i < 20; i++) {
    const name = `bench ${String.fromCharCode(97 + i)}`;
    const reply = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      ...auth,
      body: { ...BENCH_SERVICE, name },
    });
    services.push(reply.body.data.service.id);
  }
  const statements = () => h.queries.filter((q) => !/^\s*(begin|commit|listen)/i.test(q)).length;

  // deploy: accepted through the API, run by one worker as berth serve runs it.
  const worker = startWorker(h.deps);
  await worker.start();
  const each = Math.max(1, Math.round(DEPLOYS / services.length));
  let ids: string[] = [];
  await openPool(h.deps.store.db);
  h.queries.length = 0;
  const pgFrom = await postgresTicks(h.deps.store.db);
  const profiler = await startProfile();
  let cpuFrom = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < each; i++) {
    const accepted = await Promise.all(
      services.map((id) =>
        h.request('POST', `/v1/environments/${t.envId}/services/${id}/deploy`, { ...auth, body: {} }),
      ),
    );
    ids = ids.concat(accepted.map((a) => a.body.data.deployment_id as string));
  }
  await pollUntil(
    'the deployments to finish',
    async () => {
      const done = await h.deps.store.db
        .selectFrom('deployments')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('state', 'in', ['success', 'failed'])
        .executeTakeFirstOrThrow();
      return Number(done.n) >= ids.length ? true : undefined;
    },
    { timeoutMs: 600_000, intervalMs: 100 },
  );
  const deployWallS = (performance.now() - started) / 1000;
  const deployCpuMs = cpuMs(cpuFrom) / ids.length;
  await profiler?.stop();
  const deployPgMs = ((await postgresCpuS(h.deps.store.db, pgFrom)) * 1000) / ids.length;
  const deployStatements = statements() / ids.length;
  if (process.env.BENCH_CPU_STATEMENTS)
    fs.writeFileSync(process.env.BENCH_CPU_STATEMENTS, h.queries.join('\n;;\n'));
  await worker.stop();

  // list: a page of 100 of LIST_SERVICES services, copied in SQL from the first.
  const { rows: columns } = await sql<{ column_name: string }>`
    SELECT column_name FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name = 'services' ORDER BY ordinal_position`.execute(
    h.deps.store.db,
  );
  const copied: Record<string, string> = {
    id: 'gen_random_uuid()',
    name: `name || ' ' || i`,
    subdomain: `subdomain || '-' || i`,
    created_at: `created_at + i * interval '1 millisecond'`,
  };
  const names = columns.map((c) => `"${c.column_name}"`).join(', ');
  const values = columns.map((c) => copied[c.column_name] ?? `"${c.column_name}"`).join(', ');
  await sql`
    INSERT INTO services (${sql.raw(names)}) SELECT ${sql.raw(values)}
    FROM services, generate_series(1, ${LIST_SERVICES - services.length}::int) AS i
    WHERE services.id = ${services[0]}`.execute(h.deps.store.db);
  await sql`ANALYZE services`.execute(h.deps.store.db);
  const listUrl = `/v1/environments/${t.envId}/services?limit=100`;
  const first = await h.request('GET', listUrl, auth);
  if (first.body.data.services.length !== 100) throw new Error('a list page should hold 100 services');
  const LIST_PAGES = 200;
  let listCpuMs = Number.POSITIVE_INFINITY;
  let listPgMs = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    h.queries.length = 0;
    const pg = await postgresTicks(h.deps.store.db);
    cpuFrom = process.cpuUsage();
    for (let i = 0; i < LIST_PAGES; i++) {
      const page = await h.app.inject({
        method: 'GET',
        url: listUrl,
        headers: { authorization: `Bearer ${t.token}` },
      });
      if (page.statusCode !== 200) throw new Error(`list: HTTP ${page.statusCode}`);
    }
    listCpuMs = Math.min(listCpuMs, cpuMs(cpuFrom) / LIST_PAGES);
    listPgMs = Math.min(listPgMs, ((await postgresCpuS(h.deps.store.db, pg)) * 1000) / LIST_PAGES);
  }
  const listStatements = statements() / LIST_PAGES;

  // poll
  const url = `/v1/deployments/${ids[0]}`;
  const sample = await h.request('GET', url, auth);
  const bare = Fastify();
  bare.get(
    url,
    { schema: { response: conditionalResponses(Envelope(Type.Object({ deployment: Deployment }))) } },
    async (_request, reply) =>
      reply.header('etag', sample.headers.etag).type('application/json; charset=utf-8').send(sample.raw),
  );
  // node:http answering the same bytes and headers: what the framework itself costs.
  const plain = http.createServer((_request, response) => {
    response.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      etag: String(sample.headers.etag),
      'content-length': Buffer.byteLength(sample.raw),
    });
    response.end(sample.raw);
  });
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  const berthGet = getter(await listening(h.app), url, { authorization: `Bearer ${t.token}` });
  const bareGet = getter(await listening(bare), url, {});
  const plainGet = getter(plain, url, {});

  // Warm all three (V8 optimizes the hot paths), then measure them in turn, twice.
  await cpuPerRequest(berthGet);
  await cpuPerRequest(bareGet);
  await cpuPerRequest(plainGet);
  const plainUs = Math.min(await cpuPerRequest(plainGet), await cpuPerRequest(plainGet));
  const bareUs = Math.min(await cpuPerRequest(bareGet), await cpuPerRequest(bareGet));
  h.queries.length = 0;
  const answeredFrom = h.app.fastPolls.answered;
  const berthUs = Math.min(await cpuPerRequest(berthGet), await cpuPerRequest(berthGet));
  const pollStatements = statements() / (2 * ROUNDS * REQUESTS);
  const fastShare = (h.app.fastPolls.answered - answeredFrom) / (2 * ROUNDS * REQUESTS);
  // The same polls through Fastify's router and hooks (fast-polls.ts off): what the fast path saves.
  h.app.fastPolls.enabled = false;
  await cpuPerRequest(berthGet);
  const usualUs = Math.min(await cpuPerRequest(berthGet), await cpuPerRequest(berthGet));
  h.app.fastPolls.enabled = true;
  await bare.close();
  plain.closeAllConnections();
  await new Promise((resolve) => plain.close(resolve));
  console.log(
    JSON.stringify({
      database: TEST_DATABASE,
      poll_node_http_cpu_us: round1(plainUs),
      poll_bare_fastify_cpu_us: round1(bareUs),
      poll_berth_cpu_us: round1(berthUs),
      poll_added_cpu_us: round1(berthUs - bareUs),
      poll_fast_share: Math.round(fastShare * 1000) / 1000,
      poll_berth_usual_path_cpu_us: round1(usualUs),
      poll_statements: Math.round(pollStatements * 1000) / 1000,
      list_page_cpu_ms: Math.round(listCpuMs * 100) / 100,
      list_page_db_server_cpu_ms: TEST_DATABASE === 'postgres' ? Math.round(listPgMs * 100) / 100 : null,
      list_page_statements: round1(listStatements),
      deploy_cpu_ms: Math.round(deployCpuMs * 100) / 100,
      deploy_db_server_cpu_ms: TEST_DATABASE === 'postgres' ? Math.round(deployPgMs * 100) / 100 : null,
      deploy_statements: round1(deployStatements),
      deploys: ids.length,
      deploy_wall_s: round1(deployWallS),
    }),
  );
} finally {
  for (const agent of agents) agent.destroy();
  await h.close();
}

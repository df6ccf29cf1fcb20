/**
 * Where a saturated poll's CPU goes, the request or the process: `node bench/poll-process.ts`
 * (BERTH_TEST_DATABASE picks the database, embedded by default; BENCH_POSTGRES_URL an admin connection
 * for Postgres). Three servers are sent the same request (the poll's Authorization header too) and
 * answer the same bytes under autocannon's shape (50 kept-alive connections, BENCH_POLL_REQUESTS
 * requests a round, the client in a process of its own): node:http in a process of its own (the bench
 * row's baseline, two headers), the same node:http handler inside a real `berth serve`
 * (bench/in-serve-handler.ts, loaded with --import: the app, its database and its job worker as the bench
 * row runs them), and Berth's kept poll (GET /v1/deployments/{id}, answered ahead of the router) in that
 * process. Rounds alternate; each server's main thread's CPU (/proc/.../schedstat) is divided by the
 * requests answered. Node:http alone against node:http inside `berth serve` is what the process costs;
 * node:http against Berth in the same process is what Berth's request costs (docs/performance.md, "Polls
 * ahead of the router"). Prints one JSON line: the median and minimum of BENCH_POLL_ROUNDS rounds.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TEST_DATABASE } from '../test/helpers/database.ts';
import { median } from './median.ts';
import { BERTH_BIN, log, type Proc, postgresDatabase, spawnNode, waitFor } from './process.ts';
import { BENCH_SERVICE } from './service.ts';

const ROUNDS = Number(process.env.BENCH_POLL_ROUNDS ?? 5);
const REQUESTS = Number(process.env.BENCH_POLL_REQUESTS ?? 40_000);
const CONNECTIONS = 50;
const HERE = path.dirname(new URL(import.meta.url).pathname);

/** A thread's CPU time so far, in nanoseconds. */
const threadNs = (pid: number) =>
  Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);

/** The bench row's baseline handler in a process of its own, keeping a tick object as the row's does. */
const ALONE = `
const body = require('node:fs').readFileSync(process.argv[1]);
const server = require('node:http').createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  response.end(body);
});
import(${JSON.stringify(new URL('../src/tick-shape.ts', import.meta.url).href)}).then(({ keepTickShape }) => {
  keepTickShape();
  server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
});`;

/** autocannon in a child process, so that its work is in no server's figure. */
const CANNON = `require(${JSON.stringify(new URL(import.meta.resolve('autocannon')).pathname)})(JSON.parse(process.argv[1]), (error, result) => {
  if (error) throw error;
  console.log(JSON.stringify({ answered: result['2xx'], failed: result.non2xx + result.errors + result.timeouts }));
});`;

async function cannon(url: string, headers: Record<string, string>): Promise<number> {
  const options = JSON.stringify({ url, headers, connections: CONNECTIONS, amount: REQUESTS });
  const proc = spawnNode(['-e', CANNON, options], {});
  await new Promise((resolve) => proc.child.once('exit', resolve));
  const { answered, failed } = JSON.parse(proc.out());
  if (failed > 0) throw new Error(`${url}: ${failed} requests failed`);
  return answered;
}

const stops: Array<() => Promise<void>> = [];

function started(proc: Proc): Proc {
  stops.unshift(proc.stop);
  return proc;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-poll-process-'));
const bodyFile = path.join(work, 'body.json');
const portFile = path.join(work, 'port');
try {
  const database = TEST_DATABASE === 'postgres' ? await postgresDatabase('berth_poll_process') : undefined;
  if (database) stops.push(database.drop);
  const databaseUrl = database?.url;
  log(`poll-process, ${TEST_DATABASE}: starting berth serve`);
  const berth = started(
    spawnNode(['--import', path.join(HERE, 'in-serve-handler.ts'), BERTH_BIN, 'serve'], {
      BERTH_DATA_DIR: path.join(work, 'data'),
      BERTH_PORT: '0',
      BERTH_RATE_LIMIT_PER_MIN: '10000000',
      BERTH_SIM_STEP_MS: '10',
      BENCH_HANDLER_PORT_FILE: portFile,
      BENCH_HANDLER_BODY_FILE: bodyFile,
      ...(databaseUrl ? { BERTH_DATABASE_URL: databaseUrl } : {}),
    }),
  );
  const out = (pattern: RegExp) =>
    waitFor('berth serve to start', () => {
      if (berth.child.exitCode !== null) throw new Error(`berth serve exited: ${berth.out()}`);
      return pattern.exec(berth.out())?.[1];
    });
  const base = await out(/listening on (http:\/\/\S+)/);
  const token = await out(/API token:\s+([0-9a-f-]{36})/);
  const envId = await out(/environment:\s+([0-9a-f-]{36})/);
  const auth = { authorization: `Bearer ${token}` };
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(new URL(url, base), {
      method,
      headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const raw = Buffer.from(await res.arrayBuffer());
    if (res.status >= 400) throw new Error(`${method} ${url}: HTTP ${res.status} ${raw}`);
    return { raw, body: JSON.parse(raw.toString('utf8')) };
  };
  await waitFor('the environment to be available', async () =>
    (await call('GET', `/v1/environments/${envId}`)).body.data.environment.state === 'available'
      ? true
      : undefined,
  );
  const service = await call('POST', `/v1/environments/${envId}/services`, {
    ...BENCH_SERVICE,
    name: 'poll process',
  });
  const deployed = await call(
    'POST',
    `/v1/environments/${envId}/services/${service.body.data.service.id}/deploy`,
    {},
  );
  const poll = `${base}/v1/deployments/${deployed.body.data.deployment_id}`;
  const sample = await waitFor(
    'the deployment to finish',
    async () => {
      const res = await call('GET', poll);
      return res.body.data.deployment.state === 'success' ? res : undefined;
    },
    120_000,
    50,
  );
  fs.writeFileSync(bodyFile, sample.raw);
  const alone = started(spawnNode(['-e', ALONE, bodyFile], {}));
  const aloneUrl = await waitFor('node:http to listen', () => /listening on (\S+)/.exec(alone.out())?.[1]);
  const insidePort = await waitFor('the handler inside berth serve', () =>
    fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8') || undefined : undefined,
  );
  const berthPid = berth.child.pid as number;
  const servers = {
    node_http_alone: { url: `${aloneUrl}/`, headers: auth, pid: alone.child.pid as number },
    node_http_in_berth: { url: `http://127.0.0.1:${insidePort}/`, headers: auth, pid: berthPid },
    berth: { url: poll, headers: auth, pid: berthPid },
  };
  const cpu: Record<string, number[]> = Object.fromEntries(Object.keys(servers).map((name) => [name, []]));
  // The first round of each warms it; rounds of the three alternate.
  for (let r = 0; r <= ROUNDS; r++) {
    for (const [name, server] of Object.entries(servers)) {
      const from = threadNs(server.pid);
      const answered = await cannon(server.url, server.headers);
      if (r > 0) cpu[name]?.push((threadNs(server.pid) - from) / 1000 / answered);
    }
  }
  const round1 = (n: number) => Math.round(n * 10) / 10;
  const figures = Object.fromEntries(
    Object.entries(cpu).flatMap(([name, values]) => [
      [`${name}_cpu_us`, round1(median(values))],
      [`${name}_cpu_us_min`, round1(Math.min(...values))],
    ]),
  );
  console.log(
    JSON.stringify({
      database: TEST_DATABASE,
      ...figures,
      load_average_1m: round1(os.loadavg()[0] as number),
    }),
  );
} finally {
  for (const stop of stops) await stop();
  fs.rmSync(work, { recursive: true, force: true });
}

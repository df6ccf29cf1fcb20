/**
 * Where a saturated poll's CPU goes, the request or the process: `node bench/poll-process.ts`
 * (BERTH_TEST_DATABASE picks the database, embedded by default). Three servers answer the same bytes
 * under autocannon's shape (50 kept-alive connections, BENCH_POLL_REQUESTS requests a round, the client
 * in a process of its own): node:http in a process of its own (the bench row's baseline, two headers),
 * the same node:http handler inside Berth's process (the app and its job worker running, as in
 * `berth serve`), and Berth's kept poll (GET /v1/deployments/{id}, answered ahead of the router) in that
 * process. Rounds alternate; each server's main thread's CPU (/proc/.../schedstat) is divided by the
 * requests answered. Node:http alone
 * against node:http inside Berth's process is what the process costs; node:http against Berth in the
 * same process is what Berth's request costs (docs/performance.md, "Polls ahead of the router").
 * Prints one JSON line: the median and minimum of BENCH_POLL_ROUNDS rounds.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TEST_DATABASE } from '../test/helpers/database.ts';
import { startHarness, VALID_SERVICE } from '../test/helpers/harness.ts';
import { pollUntil } from '../test/helpers/poll.ts';
import { median } from './median.ts';

const ROUNDS = Number(process.env.BENCH_POLL_ROUNDS ?? 5);
const REQUESTS = Number(process.env.BENCH_POLL_REQUESTS ?? 40_000);
const CONNECTIONS = 50;
const HERE = path.dirname(new URL(import.meta.url).pathname);

/** A thread's CPU time so far, in nanoseconds. */
const threadNs = (pid: number) =>
  Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);

/** The bench row's baseline handler: the body as a Buffer, two headers. */
const handler = (body: Buffer) => (_request: http.IncomingMessage, response: http.ServerResponse) => {
  response.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
  });
  response.end(body);
};

/** The same handler in a process of its own. */
const ALONE = `
const body = require('node:fs').readFileSync(process.argv[1]);
const server = require('node:http').createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  response.end(body);
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.on('SIGTERM', () => process.exit(0));`;

/** autocannon in a child process, so that its work is in no server's figure. */
const CANNON = `require('autocannon')(JSON.parse(process.argv[1]), (error, result) => {
  if (error) throw error;
  console.log(JSON.stringify({ answered: result['2xx'], failed: result.non2xx + result.errors + result.timeouts }));
});`;

function cannon(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const options = JSON.stringify({ url, headers, connections: CONNECTIONS, amount: REQUESTS });
    const child = spawn(process.execPath, ['-e', CANNON, options], {
      cwd: HERE,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.on('exit', () => {
      const { answered, failed } = JSON.parse(out);
      if (failed > 0) reject(new Error(`${url}: ${failed} requests failed`));
      else resolve(answered);
    });
  });
}

// Errors only: dropping the test database at the end warns about the connections it ends.
const h = await startHarness({ logLevel: 'error', rateLimitPerMin: 100_000_000 });
const worker = await h.startWorker();
const bodyFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'berth-poll-process-')), 'body.json');
let alone: ReturnType<typeof spawn> | undefined;
try {
  const t = await h.tenant();
  const auth = { token: t.token };
  const service = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    ...auth,
    body: VALID_SERVICE.docker,
  });
  const deployed = await h.request(
    'POST',
    `/v1/environments/${t.envId}/services/${service.body.data.service.id}/deploy`,
    { ...auth, body: {} },
  );
  const poll = `/v1/deployments/${deployed.body.data.deployment_id}`;
  const sample = await pollUntil('the deployment to finish', async () => {
    const res = await h.request('GET', poll, auth);
    return res.body.data.deployment.state === 'success' ? res : undefined;
  });
  const body = Buffer.from(sample.raw);
  fs.writeFileSync(bodyFile, body);
  const aloneProcess = spawn(process.execPath, ['-e', ALONE, bodyFile], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  alone = aloneProcess;
  const alonePort = await new Promise<number>((resolve, reject) => {
    aloneProcess.once('exit', () => reject(new Error('the node:http process exited')));
    aloneProcess.stdout.once('data', (chunk) => resolve(Number(String(chunk).trim())));
  });
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  const inside = http.createServer(handler(body));
  await new Promise<void>((resolve) => inside.listen(0, '127.0.0.1', resolve));
  const port = (server: { address(): unknown }) => (server.address() as AddressInfo).port;

  const servers = {
    node_http_alone: {
      url: `http://127.0.0.1:${alonePort}/`,
      headers: {},
      cpuNs: () => threadNs(aloneProcess.pid as number),
    },
    node_http_in_berth: {
      url: `http://127.0.0.1:${port(inside)}/`,
      headers: {},
      cpuNs: () => threadNs(process.pid),
    },
    berth: {
      url: `http://127.0.0.1:${port(h.app.server)}${poll}`,
      headers: { authorization: `Bearer ${t.token}` },
      cpuNs: () => threadNs(process.pid),
    },
  };
  const cpu: Record<string, number[]> = Object.fromEntries(Object.keys(servers).map((name) => [name, []]));
  const answeredFrom = h.app.fastPolls.answered;
  // The first round of each warms it; rounds of the three alternate.
  for (let r = 0; r <= ROUNDS; r++) {
    for (const [name, server] of Object.entries(servers)) {
      const from = server.cpuNs();
      const answered = await cannon(server.url, server.headers);
      if (r > 0) cpu[name]?.push((server.cpuNs() - from) / 1000 / answered);
    }
  }
  const round1 = (n: number) => Math.round(n * 10) / 10;
  const figures = Object.fromEntries(
    Object.entries(cpu).flatMap(([name, values]) => [
      [`${name}_cpu_us`, round1(median(values))],
      [`${name}_cpu_us_min`, round1(Math.min(...values))],
    ]),
  );
  const fastShare = (h.app.fastPolls.answered - answeredFrom) / ((ROUNDS + 1) * REQUESTS);
  console.log(
    JSON.stringify({
      database: TEST_DATABASE,
      ...figures,
      fast_share: Math.round(fastShare * 1000) / 1000,
      load_average_1m: round1(os.loadavg()[0] as number),
    }),
  );
  inside.closeAllConnections();
  await new Promise((resolve) => inside.close(resolve));
} finally {
  alone?.kill();
  await worker.stop();
  await h.close();
  fs.rmSync(path.dirname(bodyFile), { recursive: true, force: true });
}

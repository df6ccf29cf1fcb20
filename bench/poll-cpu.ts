/**
 * Server CPU per kept poll, the client's work left out: `node bench/poll-cpu.ts` (BERTH_TEST_DATABASE
 * picks the database, embedded by default). One process: Berth's app and a node:http server answering
 * the same bytes with the same headers listen on loopback, and a worker thread sends the polls
 * (GET /v1/deployments/{id} of a finished deployment, kept-alive connections, BENCH_POLL_CONCURRENCY at
 * a time). Only the main thread's CPU time is counted (/proc/self/task/<pid>/schedstat, nanoseconds),
 * which is where both servers run, so the client thread's work is in neither figure. Rounds of
 * BENCH_POLL_REQUESTS requests alternate between node:http, Berth with kept polls answered ahead of
 * the router (src/api/fast-polls.ts) and Berth with that off (Fastify's router and hooks); the
 * minimum of BENCH_POLL_ROUNDS rounds of each; then the same node:http server in a process of its own,
 * measured the same way (`node_http_alone_cpu_us`). The process's other threads but the client's (the
 * collector's helpers, libuv's pool) are reported beside (`*_other_threads_cpu_us`). A loaded machine
 * moves these figures far less than requests a second. The client cannot keep the server saturated, so
 * each request pays an event-loop wake-up in either server: ratios here read closer to 1 than under
 * autocannon (bench/run.ts's poll row; docs/performance.md, "Polls ahead of the router"). Prints one
 * JSON line.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import { TEST_DATABASE } from '../test/helpers/database.ts';
import { startHarness, VALID_SERVICE } from '../test/helpers/harness.ts';
import { pollUntil } from '../test/helpers/poll.ts';

const ROUNDS = Number(process.env.BENCH_POLL_ROUNDS ?? 9);
const REQUESTS = Number(process.env.BENCH_POLL_REQUESTS ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_POLL_CONCURRENCY ?? 10);

/** This process's main thread's CPU time so far, in nanoseconds. */
const mainThreadNs = () =>
  Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);

/** The client, in a thread of its own: on each message, `requests` GETs of `url`; answers the non-200 count. */
const CLIENT = `
const http = require('node:http');
const { parentPort } = require('node:worker_threads');
// Its own thread id first, so that the main thread can leave its CPU out.
parentPort.postMessage(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
parentPort.on('message', async ({ url, headers, requests, concurrency }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let failed = 0;
  let left = requests;
  const one = () => new Promise((resolve) => {
    http.get(url, { headers, agent }, (res) => {
      if (res.statusCode !== 200) failed++;
      res.resume();
      res.on('end', resolve);
    }).on('error', () => { failed++; resolve(); });
  });
  await Promise.all(Array.from({ length: concurrency }, async () => { while (left-- > 0) await one(); }));
  agent.destroy();
  parentPort.postMessage(failed);
});`;

/**
 * node:http answering the same bytes in a process of its own, measured the same way (main thread only,
 * the same client in a thread): what the same server costs outside Berth's process. Prints the
 * minimum microseconds a request.
 */
const ALONE = `
const fs = require('node:fs');
const http = require('node:http');
const { Worker } = require('node:worker_threads');
const { body, headers, rounds, requests, concurrency, client } = JSON.parse(process.argv[1]);
const ns = () => Number(fs.readFileSync('/proc/self/task/' + process.pid + '/schedstat', 'utf8').split(' ')[0]);
const server = http.createServer((_request, response) => {
  response.writeHead(200, { 'x-request-id': crypto.randomUUID(), ...headers, 'content-length': Buffer.byteLength(body) });
  response.end(body);
});
server.listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + server.address().port + '/';
  const worker = new Worker(client, { eval: true });
  // Its first message is its thread id.
  await new Promise((resolve) => worker.once('message', resolve));
  let best = Infinity;
  for (let r = 0; r <= rounds; r++) {
    const from = ns();
    await new Promise((resolve) => {
      worker.once('message', resolve);
      worker.postMessage({ url, headers: {}, requests, concurrency });
    });
    if (r > 0) best = Math.min(best, (ns() - from) / 1000 / requests);
  }
  console.log(best);
  await worker.terminate();
  server.close();
});`;

/** ALONE in a child process. */
function alone(body: string, headers: Record<string, string | number>): number {
  const options = {
    body,
    headers,
    rounds: ROUNDS,
    requests: REQUESTS,
    concurrency: CONCURRENCY,
    client: CLIENT,
  };
  return Number(execFileSync(process.execPath, ['-e', ALONE, JSON.stringify(options)], { encoding: 'utf8' }));
}

// Errors only: dropping the test database at the end warns about the connections it ends.
const h = await startHarness({ logLevel: 'error', rateLimitPerMin: 100_000_000 });
const client = new Worker(CLIENT, { eval: true });
const clientTid = await new Promise<string>((resolve) => client.once('message', resolve));

/** CPU time of this process's other threads (V8's collector helpers, libuv's pool): not the main one, not the client's. */
function otherThreadsNs(): number {
  let ns = 0;
  for (const tid of fs.readdirSync('/proc/self/task')) {
    if (tid === String(process.pid) || tid === clientTid) continue;
    try {
      ns += Number(fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return ns;
}
try {
  const worker = await h.startWorker();
  const t = await h.tenant();
  const auth = { token: t.token };
  const service = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    ...auth,
    body: VALID_SERVICE.docker,
  });
  const serviceId = service.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    ...auth,
    body: {},
  });
  const path = `/v1/deployments/${deployed.body.data.deployment_id}`;
  const sample = await pollUntil('the deployment to finish', async () => {
    const res = await h.request('GET', path, auth);
    return res.body.data.deployment.state === 'success' ? res : undefined;
  });
  // Its polling loop would run in the measured thread.
  await worker.stop();
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  const berthUrl = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}${path}`;
  // The same bytes and headers as Berth's answer: what node:http itself costs to send them.
  const sameHeaders = {
    'ratelimit-limit': 100_000_000,
    'ratelimit-remaining': 99_999_999,
    'ratelimit-reset': 60,
    etag: String(sample.headers.etag),
    'content-type': 'application/json; charset=utf-8',
  };
  const plain = http.createServer((_request, response) => {
    response.writeHead(200, {
      'x-request-id': crypto.randomUUID(),
      ...sameHeaders,
      'content-length': Buffer.byteLength(sample.raw),
    });
    response.end(sample.raw);
  });
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  const plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}${path}`;

  /** Microseconds a request of the main thread, and of the other threads but the client's. */
  const round = (url: string, headers: Record<string, string>) =>
    new Promise<[number, number]>((resolve, reject) => {
      const from = mainThreadNs();
      const othersFrom = otherThreadsNs();
      client.once('message', (failed: number) => {
        const ns = mainThreadNs() - from;
        const others = otherThreadsNs() - othersFrom;
        if (failed > 0) reject(new Error(`${url}: ${failed} requests failed`));
        else resolve([ns / 1000 / REQUESTS, others / 1000 / REQUESTS]);
      });
      client.postMessage({ url, headers, requests: REQUESTS, concurrency: CONCURRENCY });
    });
  const bearer = { authorization: `Bearer ${t.token}` };
  const kinds = {
    node_http: () => round(plainUrl, {}),
    berth_fast: () => {
      h.app.fastPolls.enabled = true;
      return round(berthUrl, bearer);
    },
    berth_usual: () => {
      h.app.fastPolls.enabled = false;
      return round(berthUrl, bearer);
    },
  };
  const best: Record<string, number> = {};
  /** The other threads' CPU in the round of each kind's best main-thread figure. */
  const others: Record<string, number> = {};
  const answeredFrom = h.app.fastPolls.answered;
  // The first round of each warms it (V8 optimizes the hot paths); rounds of the three alternate.
  for (let r = 0; r <= ROUNDS; r++) {
    for (const [kind, measure] of Object.entries(kinds)) {
      const [us, otherUs] = await measure();
      if (r > 0 && us < (best[kind] ?? Number.POSITIVE_INFINITY)) {
        best[kind] = us;
        others[kind] = otherUs;
      }
    }
  }
  const aloneUs = alone(sample.raw, sameHeaders);
  const fastShare = (h.app.fastPolls.answered - answeredFrom) / ((ROUNDS + 1) * REQUESTS);
  const round1 = (n: number) => Math.round(n * 10) / 10;
  const nodeUs = best.node_http as number;
  console.log(
    JSON.stringify({
      database: TEST_DATABASE,
      node_http_cpu_us: round1(nodeUs),
      node_http_alone_cpu_us: round1(aloneUs),
      berth_fast_cpu_us: round1(best.berth_fast as number),
      berth_usual_path_cpu_us: round1(best.berth_usual as number),
      // Beside the main thread, in the same rounds (the collector's helpers, libuv's pool).
      node_http_other_threads_cpu_us: round1(others.node_http as number),
      berth_fast_other_threads_cpu_us: round1(others.berth_fast as number),
      berth_usual_other_threads_cpu_us: round1(others.berth_usual as number),
      fast_share: Math.round(fastShare * 1000) / 1000,
      // What the CPU figures predict for requests a second when the server's core is the bound.
      ratio_fast: Math.round((nodeUs / (best.berth_fast as number)) * 100) / 100,
      ratio_usual: Math.round((nodeUs / (best.berth_usual as number)) * 100) / 100,
      load_average_1m: Math.round(((await import('node:os')).loadavg()[0] as number) * 10) / 10,
    }),
  );
  plain.closeAllConnections();
  await new Promise((resolve) => plain.close(resolve));
} finally {
  await client.terminate();
  await h.close();
}

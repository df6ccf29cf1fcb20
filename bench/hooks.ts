/**
 * CPU per request of a served-from-cache poll (GET /v1/deployments/{id}), in process, next to a bare
 * Fastify route answering the same bytes through the same response schema in the same run: what
 * Berth's hooks, auth, rate limit and read cache add to the framework. CPU time (process.cpuUsage),
 * the minimum over BENCH_HOOK_ROUNDS rounds of BENCH_HOOK_REQUESTS requests each, so that other users
 * of a shared machine hardly move it. Both listen on loopback and the client (node:http, keep-alive,
 * BENCH_HOOK_CONCURRENCY requests at a time) runs in this process, so both figures include the same
 * client work and their difference is Berth's. Not `app.inject`: light-my-request keeps about 10 KB
 * per request on Node 24, and the growing heap's collections then dominate the figures. The database is BERTH_TEST_DATABASE's (embedded by default; on Postgres the rate-limit
 * window is counted there). Prints one JSON line; `bench/run.ts` (row `hooks`) runs it for both.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { conditionalResponses } from '../src/api/plugins/conditional-reads.ts';
import { Envelope } from '../src/api/schemas/common.ts';
import { Deployment } from '../src/api/schemas/deployments.ts';
import { TEST_DATABASE } from '../test/helpers/database.ts';
import { startHarness } from '../test/helpers/harness.ts';
import { pollUntil } from '../test/helpers/poll.ts';

const ROUNDS = Number(process.env.BENCH_HOOK_ROUNDS ?? 15);
const REQUESTS = Number(process.env.BENCH_HOOK_REQUESTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_HOOK_CONCURRENCY ?? 10);

type Get = () => Promise<number>;
const agents: http.Agent[] = [];

/** GETs of `path` on `app`'s port, over kept-alive connections; each resolves to the status. */
async function getter(app: FastifyInstance, path: string, headers: Record<string, string>): Promise<Get> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
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

const h = await startHarness({ logLevel: 'warn', rateLimitPerMin: 100_000_000 });
try {
  const worker = await h.startWorker();
  const t = await h.tenant();
  const service = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: {
      name: 'bench',
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 64,
      docker_image: 'acme/bench',
    },
  });
  const serviceId = service.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  const url = `/v1/deployments/${deployed.body.data.deployment_id}`;
  const sample = await pollUntil('the deployment to finish', async () => {
    const reply = await h.request('GET', url, { token: t.token });
    return reply.body.data.deployment.state === 'success' ? reply : undefined;
  });
  // Its polling would be counted with the requests.
  await worker.stop();

  const bare = Fastify();
  bare.get(
    url,
    { schema: { response: conditionalResponses(Envelope(Type.Object({ deployment: Deployment }))) } },
    async (_request, reply) =>
      reply.header('etag', sample.headers.etag).type('application/json; charset=utf-8').send(sample.raw),
  );
  const berthGet = await getter(h.app, url, { authorization: `Bearer ${t.token}` });
  const bareGet = await getter(bare, url, {});

  // Warm both (V8 optimizes the hot paths), then measure them alternately, twice.
  await cpuPerRequest(berthGet);
  await cpuPerRequest(bareGet);
  const bareUs = Math.min(await cpuPerRequest(bareGet), await cpuPerRequest(bareGet));
  h.queries.length = 0;
  const berthUs = Math.min(await cpuPerRequest(berthGet), await cpuPerRequest(berthGet));
  const berthRequests = 2 * ROUNDS * REQUESTS;
  const queries = h.queries.filter((q) => !/^\s*(begin|commit|listen)/i.test(q)).length;
  await bare.close();
  console.log(
    JSON.stringify({
      database: TEST_DATABASE,
      bare_fastify_cpu_us: Math.round(bareUs * 10) / 10,
      berth_cpu_us: Math.round(berthUs * 10) / 10,
      added_us: Math.round((berthUs - bareUs) * 10) / 10,
      queries_per_request: Math.round((queries / berthRequests) * 1000) / 1000,
    }),
  );
} finally {
  for (const agent of agents) agent.destroy();
  await h.close();
}

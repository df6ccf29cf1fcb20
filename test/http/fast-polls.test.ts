import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { revokeApiToken } from '../../src/domain/usecases/accounts.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Kept polls answered ahead of Fastify's router (src/api/fast-polls.ts) answer exactly what the usual
 * path answers: each case is sent with the fast path on and then off, on one app over real HTTP
 * (app.inject never reaches the server's request listener), and the two answers compared header by
 * header, body, access line and metrics; the cases the fast path must not decide go to Fastify.
 */

const RATE_LIMIT = 400;
/** Failed authentications an address may make a minute: the last test reaches it. */
const FAILURES = 10;

interface Answer {
  status: number;
  /** Every header in the order sent, but Date. */
  headers: [string, string][];
  body: string;
  /** The fast path answered it. */
  fast: boolean;
}

let h: Harness;
let t: Tenant;
let port: number;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const lines: Record<string, unknown>[] = [];
let serviceUrl: string;
let deploymentUrl: string;
let domainsUrl: string;

/** Requests sent so far. */
let sent = 0;

function get(path: string, headers: Record<string, string>, method = 'GET'): Promise<Answer> {
  const before = h.app.fastPolls.answered;
  sent++;
  return new Promise((resolve, reject) => {
    http
      .request({ host: '127.0.0.1', port, path, method, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const pairs: [string, string][] = [];
          for (let i = 0; i < res.rawHeaders.length; i += 2) {
            const name = res.rawHeaders[i] as string;
            if (name.toLowerCase() !== 'date') pairs.push([name, res.rawHeaders[i + 1] as string]);
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: pairs,
            body: Buffer.concat(chunks).toString('utf8'),
            fast: h.app.fastPolls.answered > before,
          });
        });
      })
      .on('error', reject)
      .end();
  });
}

const header = (answer: Answer, name: string) => answer.headers.find(([n]) => n === name)?.[1];

/**
 * `path` with the fast path on, then off (the usual path), with the same headers. `fast`: the first is
 * sent until the fast path answers it (on Postgres a window hands out places from blocks it claims in the
 * database, and a request that finds its block used up goes the usual way, which claims the next).
 */
async function both(path: string, headers: Record<string, string>, fast = true) {
  const first = fast
    ? await pollUntil(
        `the fast path to answer ${path}`,
        async () => {
          const answer = await get(path, headers);
          return answer.fast ? answer : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 0 },
      )
    : await get(path, headers);
  h.app.fastPolls.enabled = false;
  try {
    return { fast: first, usual: await get(path, headers) };
  } finally {
    h.app.fastPolls.enabled = true;
  }
}

/**
 * The two answers are the same bytes but for the rate limit's count: the second request of the pair
 * has the next place in the window (one less remaining), and the seconds to its reset may have ticked.
 */
function assertSame({ fast, usual }: { fast: Answer; usual: Answer }) {
  assert.equal(fast.status, usual.status);
  assert.equal(fast.body, usual.body);
  const counted = (answer: Answer) =>
    answer.headers.map(([name, value]): [string, string] => {
      if (name === 'ratelimit-remaining') return [name, String(Number(value) - (answer === usual ? 0 : 1))];
      if (name === 'ratelimit-reset') return [name, 'n'];
      return [name, value];
    });
  assert.deepEqual(counted(fast), counted(usual));
  const resetFast = Number(header(fast, 'ratelimit-reset'));
  const resetUsual = Number(header(usual, 'ratelimit-reset'));
  assert.ok(resetFast - resetUsual >= 0 && resetFast - resetUsual <= 1, `${resetFast} vs ${resetUsual}`);
}

async function newToken(body: Record<string, unknown>): Promise<{ token: string; id: string }> {
  const res = await h.request('POST', '/v1/tokens', { token: t.token, body: { name: 'poller', ...body } });
  assert.equal(res.status, 200, res.raw);
  return { token: res.body.data.token.token, id: res.body.data.token.id };
}

before(async () => {
  h = await startHarness(
    {
      logLevel: 'info',
      rateLimitPerMin: RATE_LIMIT,
      authFailuresPerMin: FAILURES,
      metricsBind: { host: '127.0.0.1', port: 0 },
    },
    { write: (line: string) => void lines.push(JSON.parse(line)) },
  );
  await h.startWorker();
  t = await h.tenant();
  const auth = { token: t.token };
  const service = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    ...auth,
    body: VALID_SERVICE.docker,
  });
  assert.equal(service.status, 200, service.raw);
  const serviceId = service.body.data.service.id;
  serviceUrl = `/v1/environments/${t.envId}/services/${serviceId}`;
  domainsUrl = `${serviceUrl}/custom-domains`;
  const deployed = await h.request('POST', `${serviceUrl}/deploy`, { ...auth, body: {} });
  deploymentUrl = `/v1/deployments/${deployed.body.data.deployment_id}`;
  await pollUntil('the deployment to finish', async () => {
    const res = await h.request('GET', deploymentUrl, auth);
    return res.body.data.deployment.state === 'success' ? true : undefined;
  });
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  port = (h.app.server.address() as AddressInfo).port;
});
after(async () => {
  agent.destroy();
  await h.close();
});

describe('kept polls ahead of the router', () => {
  test('200 and 304 on each cached route: the same headers, body, access line and metrics', async () => {
    const auth = { authorization: `Bearer ${t.token}` };
    const urls = [deploymentUrl, serviceUrl, domainsUrl];
    const sentWith = new Map<string, number>();
    for (const [i, url] of urls.entries()) {
      const from = sent;
      const ok = await both(url, { ...auth, 'x-request-id': `poll-${i}` });
      sentWith.set(`poll-${i}`, sent - from);
      assert.equal(ok.fast.status, 200);
      assert.ok(ok.fast.fast, `${url} was answered by the fast path`);
      assert.ok(!ok.usual.fast);
      assertSame(ok);
      const etag = header(ok.fast, 'etag') as string;
      for (const seen of [etag, `W/${etag}`, '*', `"other", ${etag}`]) {
        const notModified = await both(url, {
          ...auth,
          'if-none-match': seen,
          'x-request-id': 'conditional',
        });
        assert.equal(notModified.fast.status, 304, seen);
        assert.ok(notModified.fast.fast);
        assertSame(notModified);
      }
      const stale = await both(url, { ...auth, 'if-none-match': '"other"' });
      assert.equal(stale.fast.status, 200);
      assert.ok(stale.fast.fast);
      // Each made its own request id: a UUID, never the other's.
      assert.match(header(stale.fast, 'x-request-id') as string, /^[0-9a-f-]{36}$/);
      assert.notEqual(header(stale.fast, 'x-request-id'), header(stale.usual, 'x-request-id'));
      stale.fast.headers = stale.fast.headers.filter(([n]) => n !== 'x-request-id');
      stale.usual.headers = stale.usual.headers.filter(([n]) => n !== 'x-request-id');
      assertSame(stale);
    }
    // Every request wrote its access line; the pair's (the last two) are the same but for the time taken.
    for (const [i, url] of urls.entries()) {
      const id = `poll-${i}`;
      const written = () => lines.filter((l) => l.reqId === id && l.msg === 'request');
      await pollUntil(`the access lines of ${id}`, async () =>
        written().length === sentWith.get(id) ? true : undefined,
      );
      const [fast, usual] = written()
        .slice(-2)
        .map(({ time: _time, ms, ...rest }) => {
          assert.equal(typeof ms, 'number');
          return rest;
        });
      assert.deepEqual(fast, usual);
      assert.deepEqual(
        { url: fast?.url, status: fast?.status, client: fast?.client },
        { url, status: 200, client: '127.0.0.1' },
      );
    }
  });

  test('metrics count a fast answer under the route template, as the usual path does', async () => {
    const count = async (route: string, status: string) => {
      const metrics = await h.deps.metrics.registry.getMetricsAsJSON();
      const histogram = metrics.find((m) => m.name === 'berth_http_request_duration_seconds');
      const values = (histogram?.values ?? []) as {
        metricName?: string;
        labels: Record<string, unknown>;
        value: number;
      }[];
      return (
        values.find(
          (v) =>
            v.metricName === 'berth_http_request_duration_seconds_count' &&
            v.labels.route === route &&
            v.labels.method === 'GET' &&
            String(v.labels.status) === status,
        )?.value ?? 0
      );
    };
    for (const [url, route] of [
      [deploymentUrl, '/v1/deployments/:deploymentId'],
      [serviceUrl, '/v1/environments/:envId/services/:serviceId'],
      [domainsUrl, '/v1/environments/:envId/services/:serviceId/custom-domains'],
    ] as const) {
      const before = await count(route, '200');
      const from = sent;
      const pair = await both(url, { authorization: `Bearer ${t.token}` });
      assert.ok(pair.fast.fast);
      // Every request counted once, those the fast path answered included.
      await pollUntil(`${route} counted`, async () =>
        (await count(route, '200')) === before + sent - from ? true : undefined,
      );
    }
  });

  test('what the fast path cannot decide goes to Fastify, which answers as before', async () => {
    const auth = { authorization: `Bearer ${t.token}` };
    const usual = async (url: string, headers: Record<string, string>, status: number, method = 'GET') => {
      const answer = await get(url, headers, method);
      const what = `${method} ${url} ${Object.keys(headers).join(', ')}`;
      assert.equal(answer.status, status, `${what}: ${answer.body.slice(0, 200)}`);
      assert.ok(!answer.fast, `${what} went to Fastify`);
      return answer;
    };
    await usual(deploymentUrl, {}, 401);
    await usual(deploymentUrl, { authorization: 'Bearer 00000000-0000-4000-8000-000000000000' }, 401);
    // Not kept: loaded by the usual path, which finds nothing.
    await usual(`/v1/deployments/${t.envId}`, auth, 404);
    await usual(`${deploymentUrl}?x=1`, auth, 200);
    await usual(`${deploymentUrl}/`, auth, 404);
    await usual(deploymentUrl.replace('/v1/', '/v1//'), auth, 404);
    await usual(deploymentUrl, auth, 200, 'HEAD');
    await usual(deploymentUrl, { ...auth, prefer: 'wait=1' }, 200);
    await usual(deploymentUrl, { ...auth, cookie: 'berth_session=x' }, 200);
    // A cookie alone: a session (this one unknown), never a token.
    await usual(deploymentUrl, { cookie: `berth_session=${'a'.repeat(43)}` }, 401);
    await usual(deploymentUrl, { ...auth, 'if-none-match': `"${'a'.repeat(9000)}"` }, 422);
  });

  test("one connection's polls of other paths and other accounts' tokens are each answered for themselves", async () => {
    // The agent keeps one connection: each poll follows another on it, whose path and token it may reuse.
    const own = { authorization: `Bearer ${t.token}`, 'x-request-id': 'again' };
    const service = await both(serviceUrl, own);
    assert.ok(service.fast.fast);
    assertSame(service);
    const deployment = await both(deploymentUrl, own);
    assert.ok(deployment.fast.fast);
    assertSame(deployment);
    assert.notEqual(deployment.fast.body, service.fast.body);
    const again = await get(serviceUrl, own);
    assert.ok(again.fast);
    assert.equal(again.body, service.fast.body);
    // Another account's token on the same path, right after a fast answer of it: not this account's read.
    const other = await h.tenant();
    const foreign = await both(serviceUrl, { ...own, authorization: `Bearer ${other.token}` }, false);
    assert.equal(foreign.fast.status, 404);
    assert.ok(!foreign.fast.fast);
    assert.equal(foreign.fast.body, foreign.usual.body);
    const back = await both(serviceUrl, own);
    assertSame(back);
    assert.equal(back.fast.body, service.fast.body);
  });

  test('every request the server receives is told to onEveryRequest, on either path', async () => {
    let told = 0;
    h.app.fastPolls.onEveryRequest(() => told++);
    const fast = await get(serviceUrl, { authorization: `Bearer ${t.token}` });
    const usual = await get('/v1/nowhere', { authorization: `Bearer ${t.token}` });
    assert.ok(fast.fast);
    assert.equal(usual.status, 404);
    assert.equal(told, 2);
  });

  test("a narrowed token's poll is fast only where the path names one of its environments", async () => {
    const narrowed = await newToken({ role: 'viewer', environment_ids: [t.envId] });
    const pair = await both(serviceUrl, { authorization: `Bearer ${narrowed.token}`, 'x-request-id': 'n' });
    assert.ok(pair.fast.fast);
    assertSame(pair);
    // A deployment's environment is known only once it is loaded: the usual path.
    const deployment = await get(deploymentUrl, { authorization: `Bearer ${narrowed.token}` });
    assert.equal(deployment.status, 200);
    assert.ok(!deployment.fast);
  });

  test('a revoked token is refused on both paths within the revocation guarantee', async () => {
    const doomed = await newToken({ role: 'viewer' });
    const auth = { authorization: `Bearer ${doomed.token}` };
    assert.ok((await both(serviceUrl, auth)).fast.fast);
    // As another process revokes it: this one learns of it only by the access notification.
    await revokeApiToken(h.deps, { requestId: 'test', clientAddress: '127.0.0.1' }, doomed.id);
    const started = Date.now();
    await pollUntil(
      'the revoked token to be refused',
      async () => ((await get(serviceUrl, auth)).status === 401 ? true : undefined),
      { timeoutMs: 5000, intervalMs: 0 },
    );
    assert.ok(Date.now() - started < 1000, 'refused within a second');
    const refused = await both(serviceUrl, auth, false);
    assert.equal(refused.fast.status, 401);
    assert.ok(!refused.fast.fast);
    assert.equal(refused.fast.body, refused.usual.body);
  });

  test('a full window is left to the usual path: the same 429 and RateLimit headers', async () => {
    const busy = await newToken({ role: 'viewer' });
    const auth = { authorization: `Bearer ${busy.token}` };
    let answer: Answer | undefined;
    for (let i = 0; i <= RATE_LIMIT; i++) answer = await get(serviceUrl, auth);
    assert.equal(answer?.status, 429);
    assert.ok(!answer?.fast);
    const refused = await both(serviceUrl, auth, false);
    assert.equal(refused.fast.status, 429);
    assert.ok(!refused.fast.fast);
    assert.equal(header(refused.fast, 'ratelimit-remaining'), '0');
    assert.ok(header(refused.fast, 'retry-after'));
    assert.equal(refused.fast.body, refused.usual.body);
  });

  test('while an address is refused for failed authentications, polls go to the usual path', async () => {
    await pollUntil(
      'the address to be refused',
      async () =>
        (await get(serviceUrl, { authorization: 'Bearer nope' })).status === 429 ? true : undefined,
      { intervalMs: 0 },
    );
    const refused = await get(serviceUrl, { authorization: `Bearer ${t.token}` });
    assert.equal(refused.status, 429);
    assert.ok(!refused.fast);
  });
});

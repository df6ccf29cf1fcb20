import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/api/app.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { ADMIN_TOKEN, startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * BERTH_TRUST_PROXY: X-Forwarded-For is believed only from the proxies it names; the address it yields
 * is what failed-authentication budgets (the API's and the hooks'), audit entries and request logs see.
 */
const FAILURES = 3;
const PROXY_V4 = '10.9.0.1';
const PROXY_V6 = 'fd00:9::1';
const lines: Record<string, unknown>[] = [];
const logs = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
    done();
  },
});
const h = await startHarness({
  authFailuresPerMin: FAILURES,
  trustProxy: [PROXY_V4, 'fd00:9::/32'],
});
// The same database and settings, but trusting no proxy (BERTH_TRUST_PROXY unset).
const untrusting = await buildApp(
  { ...h.deps, config: { ...h.deps.config, trustProxy: [] } },
  { adminToken: ADMIN_TOKEN },
);
const logged = await buildApp(
  { ...h.deps, logger: pino({ level: 'info' }, logs) },
  { adminToken: ADMIN_TOKEN },
);
after(async () => {
  await untrusting.close();
  await logged.close();
  await h.close();
});

type App = typeof untrusting;

async function from(
  app: App,
  remoteAddress: string,
  url: string,
  options: { token?: string; forwardedFor?: string; method?: 'GET' | 'POST'; body?: unknown } = {},
) {
  const requestId = randomUUID();
  const res = await app.inject({
    method: options.method ?? 'GET',
    url,
    remoteAddress,
    headers: {
      'x-request-id': requestId,
      ...(options.token && { authorization: `Bearer ${options.token}` }),
      ...(options.forwardedFor && { 'x-forwarded-for': options.forwardedFor }),
      ...(options.body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(options.body !== undefined && { payload: JSON.stringify(options.body) }),
  });
  return { status: res.statusCode, body: res.json(), requestId };
}

/** Spends an address's budget with unknown tokens, each request claiming another client. */
async function failAll(app: App, remoteAddress: string, forwardedFor: (i: number) => string) {
  for (let i = 0; i < FAILURES; i++) {
    const res = await from(app, remoteAddress, '/v1/environments', {
      token: randomUUID(),
      forwardedFor: forwardedFor(i),
    });
    assert.equal(res.status, 401);
  }
}

async function auditAddress(token: string, requestId: string) {
  const res = await h.request('GET', '/v1/audit-logs?limit=100', { token });
  const entry = res.body.data.audit_logs.find((a: { request_id: string }) => a.request_id === requestId);
  assert.ok(entry, `an audit entry for request ${requestId}`);
  return entry.client_address;
}

async function createService(app: App, remoteAddress: string, forwardedFor?: string) {
  const t = await h.tenant();
  const res = await from(app, remoteAddress, `/v1/environments/${t.envId}/services`, {
    method: 'POST',
    token: t.token,
    forwardedFor,
    body: VALID_SERVICE.docker,
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return auditAddress(t.token, res.requestId);
}

describe('without BERTH_TRUST_PROXY, forwarded headers change nothing', () => {
  test('forged X-Forwarded-For does not escape the failed-authentication budget of the real address', async () => {
    const t = await h.tenant();
    await failAll(untrusting, '10.0.1.1', (i) => `198.51.100.${i + 1}`);
    const res = await from(untrusting, '10.0.1.1', '/v1/environments', {
      token: t.token,
      forwardedFor: '198.51.100.200',
    });
    assert.equal(res.status, 429);
    // The address it claimed to forward for is not the one that was limited.
    assert.equal(
      (await from(untrusting, '198.51.100.1', '/v1/environments', { token: t.token })).status,
      200,
    );
  });

  test('the audit log names the socket peer, not the forged address', async () => {
    assert.equal(await createService(untrusting, '10.0.1.2', '198.51.100.7'), '10.0.1.2');
  });
});

describe('with BERTH_TRUST_PROXY', () => {
  test('a forged X-Forwarded-For from an address not in the list changes nothing', async () => {
    const t = await h.tenant();
    await failAll(h.app, '10.0.2.1', (i) => `198.51.100.${i + 1}`);
    assert.equal(
      (await from(h.app, '10.0.2.1', '/v1/environments', { token: t.token, forwardedFor: '198.51.100.9' }))
        .status,
      429,
    );
    assert.equal(await createService(h.app, '10.0.2.2', '198.51.100.7'), '10.0.2.2');
  });

  test('two clients behind a trusted proxy get budgets of their own', async () => {
    const t = await h.tenant();
    await failAll(h.app, PROXY_V4, () => '203.0.113.1');
    assert.equal(
      (await from(h.app, PROXY_V4, '/v1/environments', { token: t.token, forwardedFor: '203.0.113.1' }))
        .status,
      429,
    );
    assert.equal(
      (await from(h.app, PROXY_V4, '/v1/environments', { token: t.token, forwardedFor: '203.0.113.2' }))
        .status,
      200,
    );
    // The proxy's own address was never charged.
    assert.equal((await from(h.app, PROXY_V4, '/v1/environments', { token: t.token })).status, 200);
  });

  test('IPv6: a proxy inside a trusted prefix forwards its clients', async () => {
    const t = await h.tenant();
    await failAll(h.app, PROXY_V6, () => '2001:db8::1');
    const ask = (client: string) =>
      from(h.app, PROXY_V6, '/v1/environments', { token: t.token, forwardedFor: client });
    assert.equal((await ask('2001:db8::1')).status, 429);
    assert.equal((await ask('2001:db8::2')).status, 200);
  });

  test('the client is the last address no trusted proxy added: entries a client wrote itself are not believed', async () => {
    const t = await h.tenant();
    // The client at 203.0.113.5 claims to forward for others; only the trusted proxy's entry counts.
    await failAll(h.app, PROXY_V4, (i) => `192.0.2.${i + 1}, 203.0.113.5`);
    assert.equal(
      (await from(h.app, PROXY_V4, '/v1/environments', { token: t.token, forwardedFor: '203.0.113.5' }))
        .status,
      429,
    );
    assert.equal(await createService(h.app, PROXY_V4, `192.0.2.99, 203.0.113.6, ${PROXY_V4}`), '203.0.113.6');
  });

  test('the audit log names the forwarded client', async () => {
    assert.equal(await createService(h.app, PROXY_V4, '203.0.113.7'), '203.0.113.7');
  });

  test('the hooks’ failure budget counts the forwarded client too', async () => {
    const secret = `hook-secret-${randomUUID()}`;
    const connection = await h.gitConnection(await h.tenant(), 'github', { webhook_secret: secret });
    const deliver = async (forwardedFor: string, signedWith: string) => {
      const raw = JSON.stringify({ zen: 'Design for failure.', hook_id: 1 });
      const res = await h.app.inject({
        method: 'POST',
        url: `/hooks/github/${connection}`,
        remoteAddress: PROXY_V4,
        payload: raw,
        headers: {
          'content-type': 'application/json',
          'x-forwarded-for': forwardedFor,
          'x-github-event': 'ping',
          'x-github-delivery': randomUUID(),
          'x-hub-signature-256': `sha256=${createHmac('sha256', signedWith).update(raw).digest('hex')}`,
        },
      });
      return res.statusCode;
    };
    for (let i = 0; i < FAILURES; i++) assert.equal(await deliver('203.0.113.20', 'wrong'), 401);
    assert.equal(await deliver('203.0.113.20', secret), 429);
    assert.equal(await deliver('203.0.113.21', secret), 200);
  });

  test('the request log names the forwarded client', async () => {
    const res = await from(logged, PROXY_V4, '/health', { forwardedFor: '203.0.113.30' });
    const line = lines.find((l) => l.msg === 'request' && l.reqId === res.requestId);
    assert.ok(line, 'a request log line');
    assert.equal(line.client, '203.0.113.30');
    const direct = await from(logged, '10.0.3.1', '/health', { forwardedFor: '203.0.113.31' });
    assert.equal(lines.find((l) => l.reqId === direct.requestId)?.client, '10.0.3.1');
  });
});

describe('BERTH_TRUST_PROXY setting', () => {
  test('a list of addresses and CIDRs, IPv4 and IPv6', () => {
    assert.deepEqual(loadConfig({ BERTH_TRUST_PROXY: ' 10.0.0.1, 172.16.0.0/12 ,::1,fd00::/8' }).trustProxy, [
      '10.0.0.1',
      '172.16.0.0/12',
      '::1',
      'fd00::/8',
    ]);
    assert.deepEqual(loadConfig({}).trustProxy, []);
  });

  test('anything else stops the server with one line naming the setting', () => {
    for (const bad of ['proxy.internal', '10.0.0.0/33', '10.0.0.1/8/1', '*']) {
      assert.throws(
        () => loadConfig({ BERTH_TRUST_PROXY: `10.0.0.1,${bad}` }),
        (error: Error) =>
          error instanceof ConfigError &&
          error.message.startsWith('BERTH_TRUST_PROXY must be') &&
          error.message.includes(`"${bad}"`) &&
          !error.message.includes('\n'),
      );
    }
  });
});

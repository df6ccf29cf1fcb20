import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/api/app.ts';
import { openRuntime } from '../../src/runtime.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { ADMIN_TOKEN, startHarness } from '../helpers/harness.ts';

/** Failed authentication is limited per client address; the per-token window is shared on Postgres. */
const FAILURES = 3;
const PER_MIN = 5;
const h = await startHarness({ authFailuresPerMin: FAILURES, rateLimitPerMin: PER_MIN });
after(() => h.close());

let address = 0;
/** Each test acts from an address of its own, so their failures do not add up. */
const nextAddress = () => `10.0.0.${++address}`;

async function from(remoteAddress: string, url: string, authorization?: string) {
  const res = await h.app.inject({
    method: 'GET',
    url,
    remoteAddress,
    headers: authorization === undefined ? {} : { authorization },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

function assertLimited(res: Awaited<ReturnType<typeof from>>) {
  assert.equal(res.status, 429);
  assert.deepEqual(Object.keys(res.body), ['error_code', 'message', 'errors']);
  assert.equal(res.body.error_code, 'rate_limited');
  assert.equal(res.body.errors, null);
  assert.match(res.body.message, new RegExp(`at most ${FAILURES} per minute`));
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(retryAfter > 0 && retryAfter <= 60, String(res.headers['retry-after']));
}

describe('failed authentication per client address', () => {
  test(`/v1: after ${FAILURES} unknown, malformed or missing tokens the address gets 429 with Retry-After`, async () => {
    const ip = nextAddress();
    const t = await h.tenant();
    for (const authorization of [`Bearer ${randomUUID()}`, 'Bearer not-a-uuid', undefined]) {
      assert.equal((await from(ip, '/v1/environments', authorization)).status, 401);
    }
    assertLimited(await from(ip, '/v1/environments', `Bearer ${randomUUID()}`));
    // The address is refused before any token is looked at, a valid one included, until the window ends.
    assertLimited(await from(ip, '/v1/environments', `Bearer ${t.token}`));
    // Another address is not affected.
    assert.equal((await from(nextAddress(), '/v1/environments', `Bearer ${t.token}`)).status, 200);
  });

  test('successful requests do not count', async () => {
    const ip = nextAddress();
    const t = await h.tenant();
    for (let i = 0; i < FAILURES - 1; i++) {
      assert.equal((await from(ip, '/v1/environments', `Bearer ${randomUUID()}`)).status, 401);
      assert.equal((await from(ip, `/v1/environments/${t.envId}`, `Bearer ${t.token}`)).status, 200);
    }
    assert.equal((await from(ip, '/v1/environments', `Bearer ${randomUUID()}`)).status, 401);
    assertLimited(await from(ip, '/v1/environments', `Bearer ${randomUUID()}`));
  });

  test(`/admin/v1: after ${FAILURES} wrong admin tokens the address gets 429, the right token included`, async () => {
    const ip = nextAddress();
    for (let i = 0; i < FAILURES; i++) {
      assert.equal((await from(ip, '/admin/v1/accounts', `Bearer ${randomUUID()}`)).status, 401);
    }
    assertLimited(await from(ip, '/admin/v1/accounts', `Bearer ${randomUUID()}`));
    assertLimited(await from(ip, '/admin/v1/accounts', `Bearer ${ADMIN_TOKEN}`));
    assert.equal((await from(nextAddress(), '/admin/v1/accounts', `Bearer ${ADMIN_TOKEN}`)).status, 200);
  });

  test('failures on /v1 and /admin/v1 add up for one address', async () => {
    const ip = nextAddress();
    assert.equal((await from(ip, '/admin/v1/accounts', 'Bearer wrong')).status, 401);
    for (let i = 1; i < FAILURES; i++) {
      assert.equal((await from(ip, '/v1/environments', `Bearer ${randomUUID()}`)).status, 401);
    }
    assertLimited(await from(ip, '/admin/v1/accounts', `Bearer ${ADMIN_TOKEN}`));
  });

  test(`/hooks: after ${FAILURES} deliveries signed by no connection the address gets 429, a good signature included`, async () => {
    const secret = `hook-secret-${randomUUID()}`;
    const connection = await h.gitConnection(await h.tenant(), 'github', { webhook_secret: secret });
    const deliver = async (remoteAddress: string, signedWith: string) => {
      const raw = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
      const res = await h.app.inject({
        method: 'POST',
        url: `/hooks/github/${connection}`,
        remoteAddress,
        payload: raw,
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'ping',
          'x-github-delivery': randomUUID(),
          'x-hub-signature-256': `sha256=${createHmac('sha256', signedWith).update(raw).digest('hex')}`,
        },
      });
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    };
    const ip = nextAddress();
    for (let i = 0; i < FAILURES; i++) assert.equal((await deliver(ip, 'not-the-secret')).status, 401);
    assertLimited(await deliver(ip, 'not-the-secret'));
    assertLimited(await deliver(ip, secret));

    // Deliveries and API tokens have budgets of their own: a host retrying with a wrong secret does not
    // lock the address (a proxy, an office) out of the API, nor bad tokens out of the hooks.
    const t = await h.tenant();
    assert.equal((await from(ip, '/v1/environments', `Bearer ${t.token}`)).status, 200);
    const other = nextAddress();
    for (let i = 0; i < FAILURES; i++) {
      assert.equal((await from(other, '/v1/environments', `Bearer ${randomUUID()}`)).status, 401);
    }
    assertLimited(await from(other, '/v1/environments', `Bearer ${t.token}`));
    assert.equal((await deliver(other, secret)).status, 200);
  });
});

test('two API processes on one Postgres database share a token’s window: the limit lets exactly that many through', {
  skip: TEST_DATABASE !== 'postgres' && 'several processes can serve one database only on Postgres',
}, async () => {
  const second = await openRuntime(h.deps.config, pino({ level: 'silent' }));
  const app2 = await buildApp(second.deps, { adminToken: ADMIN_TOKEN });
  after(async () => {
    await app2.close();
    await second.close();
  });
  const t = await h.tenant();
  const ask = (app: typeof app2, i: number) =>
    app.inject({
      method: 'GET',
      url: '/v1/environments',
      remoteAddress: `10.1.0.${i}`,
      headers: { authorization: `Bearer ${t.token}` },
    });
  // Both processes at once, twice the limit in all: a race that a per-process count loses.
  const answers = await Promise.all(
    Array.from({ length: PER_MIN * 2 }, (_, i) => ask(i % 2 === 0 ? h.app : app2, i)),
  );
  const statuses = answers.map((a) => a.statusCode).sort();
  assert.deepEqual(statuses, [...Array(PER_MIN).fill(200), ...Array(PER_MIN).fill(429)]);
  const remaining = answers
    .filter((a) => a.statusCode === 200)
    .map((a) => Number(a.headers['ratelimit-remaining']))
    .sort();
  assert.deepEqual(remaining, [0, 1, 2, 3, 4]);
  const limited = answers.find((a) => a.statusCode === 429);
  assert.equal(limited?.json().error_code, 'rate_limited');
  assert.ok(Number(limited?.headers['retry-after']) > 0);
});

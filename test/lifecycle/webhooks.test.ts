import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Webhooks out, on the sim provider: deliveries signed the Standard Webhooks way (verified with the
 * npm library), retried with backoff through the job queue, listed, redelivered; private receivers
 * refused at create and at delivery. Retries are 50 ms apart here (BERTH_WEBHOOK_RETRY_BASE_MS).
 */
let h: Harness;
let t: Tenant;
let receiver: Server;
let receiverUrl: string;
/** What the receiver got, in order; it answers 500 to the first `failFirst` requests. */
const received: { headers: IncomingHttpHeaders; body: string; answered: number }[] = [];
let failFirst = 0;

before(async () => {
  h = await startHarness({ webhookAllowPrivate: true, webhookRetryBaseMs: 50, rateLimitPerMin: 100_000 });
  await h.startWorker();
  t = await h.tenant();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const answered = received.length < failFirst ? 500 : 204;
      received.push({ headers: req.headers, body, answered });
      res.writeHead(answered).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
});
after(async () => {
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const putSecret = (key: string, value: string) =>
  h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: [{ key, value, is_sensitive: true }] },
  });

test('a receiver that fails twice gets the event on the third try; every delivery verifies; deliveries are listed', async () => {
  failFirst = 2;
  const created = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: receiverUrl, event_types: ['secret.created'], description: 'ci' },
  });
  assert.equal(created.status, 200, created.raw);
  const webhook = created.body.data.webhook;
  assert.match(webhook.secret, /^whsec_[A-Za-z0-9+/=]{32}$/);
  assert.deepEqual(webhook.event_types, ['secret.created']);

  // The secret is shown once: not on a read, not in the list, and sealed at rest.
  const read = await h.request('GET', `/v1/webhooks/${webhook.id}`, { token: t.token });
  assert.equal(read.status, 200);
  assert.equal(read.body.data.webhook.secret, undefined);
  const list = await h.request('GET', '/v1/webhooks', { token: t.token });
  assert.deepEqual(
    list.body.data.webhooks.map((w: { id: string }) => w.id),
    [webhook.id],
  );
  assert.equal(list.raw.includes(webhook.secret), false);
  const stored = await h.deps.store.db
    .selectFrom('webhooks')
    .select('secret_sealed')
    .where('id', '=', webhook.id)
    .executeTakeFirstOrThrow();
  assert.equal(stored.secret_sealed.includes(webhook.secret.slice(6)), false);

  assert.equal((await putSecret('DB_PASSWORD', 'hunter2-very-secret')).status, 200);
  await pollUntil('three attempts', async () => (received.length >= 3 ? true : undefined));
  assert.deepEqual(
    received.map((r) => r.answered),
    [500, 500, 204],
  );
  const verifier = new Webhook(webhook.secret);
  const ids = new Set<string>();
  for (const r of received) {
    const payload = verifier.verify(r.body, r.headers as Record<string, string>) as {
      type: string;
      data: { key: string };
    };
    assert.equal(payload.type, 'secret.created');
    assert.equal(payload.data.key, 'DB_PASSWORD');
    assert.equal(r.headers['content-type'], 'application/json');
    ids.add(r.headers['webhook-id'] as string);
    assert.equal(r.body.includes('hunter2'), false, 'no secret value in a body');
  }
  assert.equal(ids.size, 1, 'every attempt carries the same webhook-id');
  // Signed with another secret, a body does not verify.
  assert.throws(() =>
    new Webhook(`whsec_${Buffer.alloc(24, 1).toString('base64')}`).verify(
      received[0]?.body as string,
      received[0]?.headers as Record<string, string>,
    ),
  );

  const deliveries = await pollUntil('the delivery to be recorded as succeeded', async () => {
    const res = await h.request('GET', `/v1/webhooks/${webhook.id}/deliveries`, { token: t.token });
    return res.body.data.deliveries[0]?.state === 'succeeded' ? res.body.data.deliveries : undefined;
  });
  assert.equal(deliveries.length, 1, 'only the wanted type was delivered');
  assert.equal(deliveries[0].attempts, 3);
  assert.equal(deliveries[0].response_code, 204);
  assert.equal(deliveries[0].event_type, 'secret.created');
  assert.equal(deliveries[0].id, [...ids][0]);

  // A redelivery sends it again, with the same webhook-id.
  const again = await h.request(
    'POST',
    `/v1/webhooks/${webhook.id}/deliveries/${deliveries[0].id}/redeliver`,
    { token: t.token, body: {} },
  );
  assert.equal(again.status, 200, again.raw);
  assert.equal(again.body.data.delivery.state, 'pending');
  await pollUntil('the redelivery', async () => (received.length >= 4 ? true : undefined));
  assert.equal(received[3]?.headers['webhook-id'], deliveries[0].id);
  const after = await pollUntil('the redelivery recorded', async () => {
    const res = await h.request('GET', `/v1/webhooks/${webhook.id}/deliveries`, { token: t.token });
    const d = res.body.data.deliveries[0];
    return d.state === 'succeeded' && d.attempts === 4 ? d : undefined;
  });
  assert.equal(after.response_code, 204);

  const deleted = await h.request('DELETE', `/v1/webhooks/${webhook.id}`, { token: t.token });
  assert.equal(deleted.status, 200, deleted.raw);
  const gone = await h.request('GET', `/v1/webhooks/${webhook.id}/deliveries`, { token: t.token });
  assert.equal(gone.status, 404);
});

test('a receiver that never answers 2xx ends failed after its attempts, and the list says why', async () => {
  failFirst = Number.MAX_SAFE_INTEGER;
  received.length = 0;
  // 1 ms, 4 ms, 16 ms ... 4 s: all eight attempts within seconds.
  h.deps.config.webhookRetryBaseMs = 1;
  const created = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: receiverUrl, event_types: ['secret.created'] },
  });
  const id = created.body.data.webhook.id;
  await putSecret('FAILING', 'x-value');
  const failed = await pollUntil(
    'the delivery to fail',
    async () => {
      const res = await h.request('GET', `/v1/webhooks/${id}/deliveries`, { token: t.token });
      return res.body.data.deliveries[0]?.state === 'failed' ? res.body.data.deliveries[0] : undefined;
    },
    { timeoutMs: 120_000 },
  );
  assert.equal(failed.attempts, 8);
  assert.equal(failed.response_code, 500);
  assert.match(failed.last_error, /answered 500/);
  assert.equal(received.length, 8);
  await h.request('DELETE', `/v1/webhooks/${id}`, { token: t.token });
  h.deps.config.webhookRetryBaseMs = 50;
});

test('a private receiver is refused at create unless allowed, and at delivery when its name resolves privately', async () => {
  h.deps.config.webhookAllowPrivate = false;
  try {
    for (const url of [
      'http://127.0.0.1:9/x',
      'http://169.254.169.254/latest/meta-data',
      'http://10.1.2.3/',
      'http://[::1]:8080/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::127.0.0.1]:18186/h',
      'http://[::a9fe:a9fe]/latest/meta-data',
      'http://[::ffff:a00:1]/',
      'http://localhost:9/',
    ]) {
      const res = await h.request('POST', '/v1/webhooks', { token: t.token, body: { url } });
      assert.equal(res.status, 422, `${url}: ${res.raw}`);
      assert.equal(res.body.errors[0].field, 'url');
      assert.match(res.body.errors[0].error, /private address.*BERTH_WEBHOOK_ALLOW_PRIVATE/);
    }
    for (const url of ['ftp://example.com/', 'not a url', 'https://user:pw@example.com/']) {
      const res = await h.request('POST', '/v1/webhooks', { token: t.token, body: { url } });
      assert.equal(res.status, 422, `${url}: ${res.raw}`);
    }
    const typo = await h.request('POST', '/v1/webhooks', {
      token: t.token,
      body: { url: receiverUrl, event_types: ['deployment.finished'] },
    });
    assert.equal(typo.status, 422);

    // Allowed when it was created, refused when it is delivered: checked on the addresses used, a
    // name's and a literal's (an IPv4-compatible loopback) alike.
    const port = (receiver.address() as AddressInfo).port;
    for (const host of ['localhost', '[::127.0.0.1]']) {
      h.deps.config.webhookAllowPrivate = true;
      const created = await h.request('POST', '/v1/webhooks', {
        token: t.token,
        body: { url: `http://${host}:${port}/hooks`, event_types: ['secret.created'] },
      });
      assert.equal(created.status, 200, created.raw);
      h.deps.config.webhookAllowPrivate = false;
      received.length = 0;
      await putSecret(`REFUSED_${host === 'localhost' ? 'NAME' : 'LITERAL'}`, 'x-value');
      const refused = await pollUntil('the delivery to be refused', async () => {
        const res = await h.request('GET', `/v1/webhooks/${created.body.data.webhook.id}/deliveries`, {
          token: t.token,
        });
        return res.body.data.deliveries[0]?.state === 'failed' ? res.body.data.deliveries[0] : undefined;
      });
      assert.equal(refused.attempts, 1, 'not retried');
      assert.match(refused.last_error, /private address/);
      assert.equal(received.length, 0);
      await h.request('DELETE', `/v1/webhooks/${created.body.data.webhook.id}`, { token: t.token });
    }
  } finally {
    h.deps.config.webhookAllowPrivate = true;
  }
});

test('deliveries are paged newest first with next_cursor; a cursor not handed out is a 422', async () => {
  const created = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: receiverUrl, event_types: ['secret.created'], description: 'paged' },
  });
  assert.equal(created.status, 200, created.raw);
  const deliveriesUrl = `/v1/webhooks/${created.body.data.webhook.id}/deliveries`;
  for (const key of ['PAGE_ONE', 'PAGE_TWO', 'PAGE_THREE']) {
    assert.equal((await putSecret(key, 'v')).status, 200);
  }
  const all = await h.request('GET', deliveriesUrl, { token: t.token });
  assert.equal(all.status, 200, all.raw);
  assert.equal(all.body.data.deliveries.length, 3);
  assert.equal(all.body.data.next_cursor, null);

  const first = await h.request('GET', `${deliveriesUrl}?limit=2`, { token: t.token });
  assert.equal(first.body.data.deliveries.length, 2);
  assert.equal(typeof first.body.data.next_cursor, 'string');
  const second = await h.request(
    'GET',
    `${deliveriesUrl}?limit=2&cursor=${encodeURIComponent(first.body.data.next_cursor)}`,
    { token: t.token },
  );
  assert.equal(second.status, 200, second.raw);
  assert.equal(second.body.data.next_cursor, null);
  const ids = (page: { body: { data: { deliveries: { id: string }[] } } }) =>
    page.body.data.deliveries.map((d) => d.id);
  assert.deepEqual([...ids(first), ...ids(second)], ids(all), 'two pages are the whole list, in order');

  const bad = await h.request('GET', `${deliveriesUrl}?cursor=not-ours`, { token: t.token });
  assert.equal(bad.status, 422, bad.raw);
  assert.equal(bad.body.errors[0].field, 'cursor');
});

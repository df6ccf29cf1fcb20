import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { userCli } from '../helpers/cli.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * `berth webhooks ...` as a user runs them: the real bin against a real `berth serve` (sim), output
 * piped, delivering to a receiver on this host (BERTH_WEBHOOK_ALLOW_PRIVATE). The receiver can hold an
 * answer back, which keeps a delivery pending.
 */
const servers = serverFixture('sim', { BERTH_WEBHOOK_ALLOW_PRIVATE: 'true' });
let server: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let receiverUrl: string;
const received: { webhookId: string; type: string }[] = [];
/** While set, the receiver answers nothing until it is called. */
let holding: Promise<void> | undefined;
const receiver = http.createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => {
    body += chunk;
  });
  req.on('end', async () => {
    received.push({ webhookId: String(req.headers['webhook-id']), type: JSON.parse(body).type });
    await holding;
    res.writeHead(204).end();
  });
});

before(async () => {
  ({ berth: server, token, envUrl } = await servers.start());
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
after(() => {
  receiver.closeAllConnections();
  receiver.close();
});

const { berth, json } = userCli(() => ({ url: server.url, token }));

async function apiData(url: string) {
  const res = await api(url, token);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data;
}

async function createService(name: string) {
  const res = await api(`${envUrl}/services`, token, 'POST', {
    name,
    source: 'docker_image',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/hello',
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

test('create prints the signing secret once; ls and get never show it; -o json is the API data', async () => {
  const made = await berth(['webhooks', 'create', receiverUrl, '--description', 'first hook']);
  assert.equal(made.code, 0, made.err);
  const secret = /^secret\t(whsec_\S+)$/m.exec(made.out)?.[1];
  assert.ok(secret, made.out);
  const id = /^id\t([0-9a-f-]{36})$/m.exec(made.out)?.[1] as string;
  assert.match(made.out, new RegExp(`^url\\t${receiverUrl}$`, 'm'));
  assert.match(made.out, /^description\tfirst hook$/m);
  assert.match(made.err, /keep the secret: .*not shown again/);

  const listed = await berth(['webhooks', 'ls']);
  assert.equal(listed.code, 0, listed.err);
  assert.match(listed.out, new RegExp(`^${id}\\t${receiverUrl}\\tall\\tfirst hook\\t`, 'm'));
  const got = await berth(['webhooks', 'get', id]);
  assert.equal(got.code, 0, got.err);
  assert.match(got.out, new RegExp(`^id\\t${id}$`, 'm'));
  const asJson = await json(['webhooks', 'ls']);
  const one = await json(['webhooks', 'get', id]);
  for (const out of [listed.out, got.out, JSON.stringify(asJson), JSON.stringify(one)]) {
    assert.doesNotMatch(out, /whsec_|secret/);
  }
  assert.deepEqual(asJson, await apiData(`${server.url}/v1/webhooks`));
  assert.deepEqual(one, await apiData(`${server.url}/v1/webhooks/${id}`));

  const typed = await json(['webhooks', 'create', receiverUrl, '--events', 'alert.opened', 'alert.resolved']);
  assert.deepEqual(typed.webhook.event_types, ['alert.opened', 'alert.resolved']);
  assert.match(typed.webhook.secret, /^whsec_/);
  assert.deepEqual(await json(['webhooks', 'delete', typed.webhook.id]), {});
  await json(['webhooks', 'delete', id]);
  assert.deepEqual((await json(['webhooks', 'ls'])).webhooks, []);
});

test('errors: an unknown event type is usage (2), a bad URL validation (5), an unknown id not found (4)', async () => {
  const badType = await berth(['webhooks', 'create', receiverUrl, '--events', 'service.exploded']);
  assert.equal(badType.code, 2, badType.err);
  assert.match(badType.err, /argument 'service\.exploded' is invalid/);
  const badUrl = await berth(['webhooks', 'create', 'ftp://example.com/x']);
  assert.equal(badUrl.code, 5, badUrl.err);
  assert.match(badUrl.err, /^ {2}url: /m);
  const missing = await berth(['webhooks', 'get', '00000000-0000-4000-8000-000000000000']);
  assert.equal(missing.code, 4, missing.err);
  const notAnId = await berth(['webhooks', 'deliveries', 'pager']);
  assert.equal(notAnId.code, 2, notAnId.err);
  assert.match(notAnId.err, /^berth: "pager" is not a webhook id \(berth webhooks ls lists them\)$/m);
  const badLimit = await berth([
    'webhooks',
    'deliveries',
    '00000000-0000-4000-8000-000000000000',
    '--limit',
    '0',
  ]);
  assert.equal(badLimit.code, 2, badLimit.err);
  assert.match(badLimit.err, /--limit takes a whole number from 1 to 100/);
  const help = await berth(['webhooks', 'create', '--help']);
  assert.match(help.out, /Examples:\n {2}\$ berth webhooks create https:\/\/hooks\.example\.com\/berth/);
});

test('deliveries page with --limit and --cursor; redeliver sends the same delivery again, and is refused while pending', async () => {
  const { webhook } = await json(['webhooks', 'create', receiverUrl, '--events', 'service.created']);
  await createService('hooked one');
  await createService('hooked two');
  const deliveries = await pollUntil('both deliveries succeeded', async () => {
    const { deliveries } = await json(['webhooks', 'deliveries', webhook.id]);
    return deliveries.length === 2 && deliveries.every((d: { state: string }) => d.state === 'succeeded')
      ? deliveries
      : undefined;
  });
  assert.deepEqual(
    await json(['webhooks', 'deliveries', webhook.id]),
    await apiData(`${server.url}/v1/webhooks/${webhook.id}/deliveries`),
  );

  const first = await berth(['webhooks', 'deliveries', webhook.id, '--limit', '1']);
  assert.equal(first.code, 0, first.err);
  assert.match(
    first.out,
    new RegExp(`^${deliveries[0].id}\\t\\d+ service\\.created\\tsucceeded\\t1\\t204\\t`),
  );
  assert.equal(first.out.trim().split('\n').length, 1);
  const cursor = new RegExp(
    `^more: berth webhooks deliveries ${webhook.id} --limit 1 --cursor (\\S+)$`,
    'm',
  ).exec(first.err)?.[1];
  assert.ok(cursor, first.err);
  const second = await json(['webhooks', 'deliveries', webhook.id, '--limit', '1', '--cursor', cursor]);
  assert.deepEqual(
    second.deliveries.map((d: { id: string }) => d.id),
    [deliveries[1].id],
  );
  assert.equal(second.next_cursor, null);

  // The receiver holds the redelivery's answer: it stays pending, and a second redeliver is a conflict.
  let release = () => {};
  holding = new Promise((resolve) => {
    release = resolve;
  });
  const before = received.length;
  const again = await json(['webhooks', 'redeliver', webhook.id, deliveries[0].id]);
  assert.equal(again.delivery.id, deliveries[0].id);
  assert.equal(again.delivery.state, 'pending');
  await pollUntil('the redelivery reached the receiver', async () =>
    received.length > before ? true : undefined,
  );
  assert.equal(received.at(-1)?.webhookId, deliveries[0].id);
  const refused = await berth(['webhooks', 'redeliver', webhook.id, deliveries[0].id]);
  assert.equal(refused.code, 6, refused.err);
  assert.match(refused.err, /^berth: conflict: /m);
  release();
  holding = undefined;
  await pollUntil('the redelivery succeeded', async () => {
    const { deliveries: now } = await json(['webhooks', 'deliveries', webhook.id]);
    const redelivered = now.find((d: { id: string }) => d.id === deliveries[0].id);
    return redelivered.state === 'succeeded' && redelivered.attempts === 2 ? true : undefined;
  });

  const deleted = await berth(['webhooks', 'delete', webhook.id]);
  assert.equal(deleted.code, 0, deleted.err);
  assert.match(deleted.err, new RegExp(`^deleted webhook ${webhook.id}$`, 'm'));
  assert.equal((await berth(['webhooks', 'get', webhook.id])).code, 4);
});

import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type ConsoleSession, signInWithToken, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';

// Webhooks from the console: subscribe a URL (its secret shown once), see what was delivered and what
// the receiver answered, send a delivery again, remove the subscription (asked first).

let db: TestDatabase;
let c: ConsoleSession;
let page: Page;
let receiver: http.Server;
let receiverUrl: string;
/** What the receiver was sent: each delivery's webhook-id header and event type. */
const received: { id: string; type: string }[] = [];

before(async () => {
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push({ id: String(req.headers['webhook-id']), type: JSON.parse(body).type });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
  db = await createTestDatabase();
  c = await startConsole({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    // The receiver is this test, on loopback.
    BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
  });
  page = c.page;
  await signInWithToken(c);
});

after(async () => {
  await c?.close();
  await db?.drop();
  await new Promise((resolve) => receiver?.close(resolve));
});

const client = () => createClient({ baseUrl: c.server.url, token: c.token });

test('subscribing shows the signing secret once; the list shows the URL and the events it wants', async () => {
  await page.goto(`${c.server.url}/#/webhooks`);
  await page.getByText('No webhooks yet').waitFor();
  await page.getByLabel('URL').fill(receiverUrl);
  await page.getByLabel('Description').fill('deploy bot');
  await page.getByRole('checkbox', { name: 'service.created' }).check();
  await page.getByRole('button', { name: 'Subscribe' }).click();
  const secret = await page.locator('#webhook-secret').textContent();
  assert.match(secret ?? '', /^whsec_/);
  const row = page.getByRole('row', { name: new RegExp(receiverUrl) });
  await row.getByText('service.created').waitFor();
  await row.getByText('deploy bot').waitFor();
  await c.checkPage('webhooks');
  // Shown only now: the page read again shows it nowhere.
  await page.reload();
  await row.waitFor();
  assert.equal(await page.locator('#webhook-secret').count(), 0);
  assert.doesNotMatch((await page.locator('main').textContent()) ?? '', new RegExp(secret ?? 'whsec_'));
});

test('a bad URL is a field error in place', async () => {
  await page.goto(`${c.server.url}/#/webhooks`);
  await page.getByLabel('URL').fill('not a url');
  await page.getByRole('button', { name: 'Subscribe' }).click();
  await page.locator('#webhook-url-error').waitFor();
  c.problems.length = 0; // the expected 422
});

test('deliveries show what the receiver answered; sending one again reaches it again with the same id', async () => {
  unwrap(
    await client().POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name: 'hooked web',
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
      },
    }),
  );
  await pollUntil('the service.created delivery to arrive', async () =>
    received.length > 0 ? true : undefined,
  );
  await page.goto(`${c.server.url}/#/webhooks`);
  await page.getByRole('link', { name: `Deliveries to ${receiverUrl}` }).click();
  await page.getByRole('heading', { name: `Deliveries to ${receiverUrl}` }).waitFor();
  const row = page.getByRole('row', { name: /service\.created/ });
  await row.getByText('succeeded').waitFor();
  await row.getByText('204').waitFor();
  await c.checkPage('webhook-deliveries');
  await row.getByRole('button', { name: /^Send again the service\.created delivery of / }).click();
  await pollUntil('the delivery sent again', async () => (received.length > 1 ? true : undefined));
  assert.deepEqual(
    received.map((r) => r.type),
    ['service.created', 'service.created'],
  );
  assert.equal(received[0]?.id, received[1]?.id, 'a delivery sent again keeps its webhook-id');
});

test('removing a webhook asks first, then it is gone', async () => {
  await page.goto(`${c.server.url}/#/webhooks`);
  await page.getByRole('button', { name: `Remove the webhook to ${receiverUrl}` }).click();
  const question = page.getByRole('region', { name: `Stop sending events to ${receiverUrl}?` });
  await question.getByRole('button', { name: 'Remove the webhook' }).click();
  await page.getByText('No webhooks yet').waitFor();
  assert.deepEqual(unwrap(await client().GET('/v1/webhooks')).webhooks, []);
});

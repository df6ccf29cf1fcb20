import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type ConsoleSession, signInWithToken, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

// The API tokens page (docs/console.md): list, make one (shown once), revoke one after confirming; the
// revoked token is refused by the API.

let db: TestDatabase;
let c: ConsoleSession;
let page: Page;

before(async () => {
  db = await createTestDatabase();
  c = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  page = c.page;
  await page.goto(`${c.server.url}/`);
  await page.evaluate((token) => sessionStorage.setItem('berth.token', token), c.token);
});

after(async () => {
  await c?.close();
  await db?.drop();
});

test('an admin makes a token (shown once), sees it listed, and revokes it after confirming', async () => {
  await page.goto(`${c.server.url}/#/envs`);
  await page.getByRole('link', { name: 'API tokens' }).click();
  await page.getByRole('heading', { name: 'API tokens', level: 1 }).waitFor();
  await page.getByLabel('Name').fill('deploy script');
  await page.getByLabel('Role').selectOption('developer');
  await page.getByLabel('Reads only').check();
  await page.getByRole('button', { name: 'Make the token' }).click();
  await page.getByText('Token deploy script made.').waitFor();
  const made = (await page.locator('#made-token').textContent()) ?? '';
  assert.match(made, /^[0-9a-f-]{36}$/);
  const row = page.getByRole('row', { name: /deploy script/ });
  await row.getByText('developer, reads only').waitFor();
  await c.checkPage('tokens');

  const madeClient = createClient({ baseUrl: c.server.url, token: made });
  assert.equal((await madeClient.GET('/v1/environments')).response.status, 200, 'the token works');

  await row.getByRole('button', { name: 'Revoke the token deploy script' }).click();
  await page.getByRole('heading', { name: 'Revoke the token deploy script?' }).waitFor();
  await c.checkPage('tokens-revoke-confirm');
  await page.getByRole('button', { name: 'Revoke deploy script' }).click();
  await row.getByText('revoked').waitFor();
  assert.equal((await madeClient.GET('/v1/environments')).response.status, 401, 'revoked');
  await c.checkPage('tokens-revoked');
  // The API lists it revoked too.
  const { tokens } = unwrap(await createClient({ baseUrl: c.server.url, token: c.token }).GET('/v1/tokens'));
  assert.ok(tokens.find((t) => t.name === 'deploy script')?.revoked_at);
});

test("revoking the tab's own token is asked as signing out, and signs the tab out cleanly", async () => {
  const admin = createClient({ baseUrl: c.server.url, token: c.token });
  const { token } = unwrap(await admin.POST('/v1/tokens', { body: { name: 'my laptop', role: 'admin' } }));
  await page.goto(`${c.server.url}/`);
  await page.evaluate((t) => sessionStorage.setItem('berth.token', t), token.token);
  await page.goto(`${c.server.url}/#/tokens`);
  const row = page.getByRole('row', { name: /my laptop \(this tab\)/ });
  await row.waitFor();
  await row.getByRole('button', { name: 'Revoke the token my laptop' }).click();
  await page.getByRole('heading', { name: 'Revoke the token my laptop and sign this tab out?' }).waitFor();
  await page.getByText('revoking it signs this tab out').waitFor();
  await c.checkPage('tokens-revoke-own');
  await page.getByRole('button', { name: 'Revoke my laptop and sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  assert.equal(
    await page.evaluate(() => sessionStorage.getItem('berth.token')),
    null,
    'the token is forgotten',
  );
  assert.equal(await page.getByRole('alert').count(), 0, 'no error on the way out');
  assert.equal(
    (await createClient({ baseUrl: c.server.url, token: token.token }).GET('/v1/environments')).response
      .status,
    401,
    'revoked',
  );
  await c.checkPage('tokens-revoked-own-signed-out');
});

test('revoking another token says nothing of signing out and keeps the tab signed in', async () => {
  const admin = createClient({ baseUrl: c.server.url, token: c.token });
  unwrap(await admin.POST('/v1/tokens', { body: { name: 'a script', role: 'viewer' } }));
  // Signed in first, on the page a sign-in lands on: the app's own move there could otherwise win over
  // the navigation below (the last test left the tab signed out).
  await signInWithToken(c);
  await page.goto(`${c.server.url}/#/tokens`);
  const row = page.getByRole('row', { name: /a script/ });
  await row.getByRole('button', { name: 'Revoke the token a script' }).click();
  await page.getByRole('heading', { name: 'Revoke the token a script?' }).waitFor();
  assert.equal(await page.getByText('signs this tab out').count(), 0);
  await page.getByRole('button', { name: 'Revoke a script' }).click();
  await row.getByText('revoked').waitFor();
  assert.equal(await page.getByRole('heading', { name: 'API tokens', level: 1 }).count(), 1);
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { type ConsoleSession, launchChromium, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

// People in the console (docs/access.md): the owner's first-start link sets a password, the password
// signs in, an invitation is made and accepted in another browser, and signing out ends the session:
// its cookie then works nowhere. Each page is checked with axe-core and photographed.

let db: TestDatabase;
let session: ConsoleSession;
let server: ConsoleSession['server'];
let page: Page;
let context: BrowserContext;
let problems: string[];
let checkPage: ConsoleSession['checkPage'];
const PASSWORD = 'the owner password 1';

before(async () => {
  db = await createTestDatabase();
  session = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  ({ server, page, context, problems, checkPage } = session);
});

after(async () => {
  await session?.close();
  await db?.drop();
});

test("the owner's first-start link sets a password and signs in", async () => {
  const link = (await server.waitForOutput(/sign in:\s+(\S+)/))[1] as string;
  await page.goto(link);
  await page.getByRole('heading', { name: 'Set your Berth password' }).waitFor();
  await checkPage('set-password');
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  const cookie = (await context.cookies()).find((c) => c.name === 'berth_session');
  assert.ok(cookie?.httpOnly, 'an HttpOnly session cookie');
  assert.equal(cookie?.sameSite, 'Lax');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.token')), null, 'no token kept');
});

test('sign out ends the session; the password signs in again', async () => {
  const before = (await context.cookies()).find((c) => c.name === 'berth_session')?.value as string;
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  const ended = await fetch(`${server.url}/v1/environments`, {
    headers: { cookie: `berth_session=${before}` },
  });
  assert.equal(ended.status, 401, 'the signed-out cookie works nowhere');
  await checkPage('sign-in-people');
  await page.getByLabel('Email', { exact: true }).fill('owner@localhost');
  await page.getByLabel('Password', { exact: true }).fill('not the password!');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByText('The email or the password is wrong.').waitFor();
  problems.length = 0; // the refused sign-in's 401 is the browser's console error, and expected
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  await page.getByRole('cell', { name: 'default' }).waitFor();
});

test('sessions listed; an invitation made, then accepted in another browser', async () => {
  await page.getByRole('link', { name: 'Sessions and people' }).click();
  await page.getByRole('heading', { name: 'Sessions and people' }).waitFor();
  await page.getByText('(this one)').waitFor();
  await page.getByLabel('Email', { exact: true }).fill('dev@example.com');
  await page.getByLabel('Role', { exact: true }).selectOption('developer');
  await page.getByRole('button', { name: 'Invite' }).click();
  const link = (await page.locator('#invitation-link').textContent()) as string;
  assert.match(link, /\/#\/accept-invitation\?token=/);
  await checkPage('people');

  const other = await launchChromium();
  try {
    const invited = await (await other.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await invited.goto(link);
    await invited.getByRole('heading', { name: 'Accept your invitation to Berth' }).waitFor();
    await invited.getByLabel('Your name').fill('Dev');
    await invited.getByLabel('Password', { exact: true }).fill('short');
    await invited.getByRole('button', { name: 'Accept and sign in' }).click();
    await invited.getByText('password must be at least 12 characters long').waitFor();
    await invited.screenshot({ path: 'test-results/console/accept-invitation-1280.png', fullPage: true });
    await invited.getByLabel('Password', { exact: true }).fill('a developer password');
    await invited.getByRole('button', { name: 'Accept and sign in' }).click();
    await invited.getByRole('heading', { name: 'Environments' }).waitFor();
    await invited.getByRole('cell', { name: 'default' }).waitFor();
  } finally {
    await other.close();
  }
  problems.length = 0;
});

test('pending invitations are listed with who invited, and one is revoked after confirming', async () => {
  await page.reload();
  await page.getByRole('heading', { name: 'Pending invitations' }).waitFor();
  await page.getByText('No invitations waiting to be accepted.').waitFor();
  await page.getByLabel('Email', { exact: true }).fill('late@example.com');
  await page.getByLabel('Role', { exact: true }).selectOption('viewer');
  await page.getByRole('button', { name: 'Invite', exact: true }).click();
  const link = (await page.locator('#invitation-link').textContent()) as string;
  const row = page.getByRole('row', { name: /late@example\.com/ });
  await row.getByRole('cell', { name: 'viewer', exact: true }).waitFor();
  await row.getByRole('cell', { name: 'owner@localhost', exact: true }).waitFor();
  await checkPage('people-pending-invitations');
  await row.getByRole('button', { name: 'Revoke the invitation of late@example.com' }).click();
  await page.getByRole('heading', { name: 'Revoke the invitation of late@example.com?' }).waitFor();
  await checkPage('people-revoke-invitation-confirm');
  await page
    .locator('.confirm')
    .getByRole('button', { name: 'Revoke the invitation of late@example.com' })
    .click();
  await row.waitFor({ state: 'detached' });
  await page.getByText('No invitations waiting to be accepted.').waitFor();
  const token = new URL(link.replace('/#/', '/')).searchParams.get('token');
  const accepted = await fetch(`${server.url}/auth/accept-invitation`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, password: 'a viewer password 1' }),
  });
  assert.equal(accepted.status, 401, 'the revoked link no longer works');
});

test('an admin removes a member from the members list', async () => {
  await page.reload();
  await page.getByRole('heading', { name: 'Members' }).waitFor();
  await page.getByRole('cell', { name: 'dev@example.com', exact: true }).waitFor();
  await checkPage('members');
  // Asked first: Cancel keeps them.
  await page.getByRole('button', { name: 'Remove dev@example.com' }).click();
  await page.getByRole('heading', { name: 'Remove dev@example.com from the account?' }).waitFor();
  await checkPage('members-remove-confirm');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('heading', { name: /from the account\?/ }).waitFor({ state: 'detached' });
  await page.reload();
  await page.getByRole('cell', { name: 'dev@example.com', exact: true }).waitFor();
  await page.getByRole('button', { name: 'Remove dev@example.com' }).click();
  await page.locator('.confirm').getByRole('button', { name: 'Remove dev@example.com' }).click();
  await page.getByRole('cell', { name: 'dev@example.com', exact: true }).waitFor({ state: 'detached' });
  await page.getByRole('heading', { name: /from the account\?/ }).waitFor({ state: 'detached' });
});

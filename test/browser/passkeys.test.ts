import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { type ConsoleSession, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

// Passkeys in the console (docs/access.md), through Chromium's own WebAuthn stack with a virtual
// authenticator (DevTools protocol: a CTAP2 platform authenticator that holds resident keys and verifies
// its user): the owner adds a passkey on the "Sessions and people" page, signs out, signs in with it
// (no email, no password), and once it is removed it signs in no more. Each page is checked with
// axe-core and photographed.

let db: TestDatabase;
let session: ConsoleSession;
let server: ConsoleSession['server'];
let page: Page;
let context: BrowserContext;
let problems: string[];
let checkPage: ConsoleSession['checkPage'];
let cdp: CDPSession;
let authenticatorId: string;

before(async () => {
  db = await createTestDatabase();
  session = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  ({ server, page, context, problems, checkPage } = session);
  // Browsers refuse an IP address as a passkey's site: the console is opened by name. The helper's
  // check that nothing leaves the server then compares against that name.
  server.url = server.url.replace('//127.0.0.1:', '//localhost:');
  cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  }));
});

after(async () => {
  await session?.close();
  await db?.drop();
});

async function signOut() {
  await page.getByRole('button', { name: 'Sign out' }).first().click();
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
}

test('the owner signs in with the first-start link and adds a passkey', async () => {
  const printed = (await server.waitForOutput(/sign in:\s+(\S+)/))[1] as string;
  await page.goto(printed.replace('//127.0.0.1:', '//localhost:'));
  await page.getByRole('heading', { name: 'Set your Berth password' }).waitFor();
  await page.getByLabel('Password', { exact: true }).fill('the owner password 1');
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();

  await page.getByRole('link', { name: 'Sessions and people' }).click();
  await page.getByRole('heading', { name: 'Passkeys' }).waitFor();
  await page.getByText('No passkeys yet.').waitFor();
  await page.getByLabel('Passkey name').fill('Test laptop');
  await page.getByRole('button', { name: 'Add a passkey' }).click();
  await page.getByRole('cell', { name: 'Test laptop', exact: true }).waitFor();
  await page.getByText('Passkey Test laptop added').waitFor();
  await checkPage('passkeys');

  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
  assert.equal(credentials.length, 1, 'the authenticator holds the new passkey');
  assert.equal(credentials[0]?.isResidentCredential, true, 'a discoverable passkey');
  assert.equal(credentials[0]?.rpId, 'localhost');
  assert.equal(credentials[0]?.signCount, 1);
});

test('signed out, the passkey signs in with no email nor password', async () => {
  await signOut();
  await page.getByRole('button', { name: 'Sign in with a passkey' }).waitFor();
  await checkPage('sign-in-passkey');
  await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  await page.getByRole('cell', { name: 'default' }).waitFor();
  const cookie = (await context.cookies()).find((c) => c.name === 'berth_session');
  assert.ok(cookie?.httpOnly, 'the same HttpOnly session cookie as a password sign-in');
  const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
  assert.equal(credentials[0]?.signCount, 2, 'the authenticator signed the sign-in');

  await page.getByRole('link', { name: 'Sessions and people' }).click();
  const row = page.getByRole('row', { name: /Test laptop/ });
  await row.waitFor();
  assert.doesNotMatch(String(await row.textContent()), /never/, 'last used is noted');
});

test('removing a passkey is asked first; a removed passkey signs in no more, and the page says so', async () => {
  let deletes = 0;
  const onRequest = (r: { method(): string }) => {
    if (r.method() === 'DELETE') deletes++;
  };
  page.on('request', onRequest);
  await page.getByRole('button', { name: 'Remove the passkey Test laptop' }).click();
  await page.getByRole('heading', { name: 'Remove the passkey Test laptop?' }).waitFor();
  await checkPage('passkey-remove-confirm');
  assert.equal(deletes, 0, 'nothing is removed before the question is answered');
  // Cancel keeps it.
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('heading', { name: 'Remove the passkey Test laptop?' }).waitFor({ state: 'detached' });
  await page.getByRole('cell', { name: 'Test laptop', exact: true }).waitFor();
  assert.equal(deletes, 0);
  await page.getByRole('button', { name: 'Remove the passkey Test laptop' }).click();
  await page.getByRole('button', { name: 'Remove Test laptop', exact: true }).click();
  await page.getByText('No passkeys yet.').waitFor();
  page.off('request', onRequest);
  assert.equal(deletes, 1);
  await signOut();
  await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
  await page.getByText('This passkey was not accepted.').waitFor();
  problems.length = 0; // the refused sign-in's 401 is the browser's console error, and expected
  await checkPage('sign-in-passkey-refused');
});

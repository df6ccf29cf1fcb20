import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type ConsoleSession, screenshots, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startOidcProvider, type TestProvider } from '../helpers/oidc-provider.ts';
import { api } from '../helpers/process.ts';

// Single sign-on in the console (docs/sso.md), end to end against a real OpenID provider (oidc-provider
// on loopback): the owner sets it up on the Single sign-on page, then a new person signs in with SSO from
// the sign-in page, through the provider's own page, and lands in the console as a member with the
// default role. A refused callback shows what went wrong. Pages are checked with axe and photographed.

let db: TestDatabase;
let session: ConsoleSession;
let idp: TestProvider;
let accountId: string;
const DOMAIN = 'sso.example.org';

before(async () => {
  db = await createTestDatabase();
  session = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  const env = await api(`${session.server.url}/v1/environments/${session.envId}`, session.token);
  accountId = env.body.data.environment.account_id;
  idp = await startOidcProvider([`${session.server.url}/sso/${accountId}/callback`]);
});

after(async () => {
  await session?.close();
  await idp?.close();
  await db?.drop();
});

/** The provider's pages are this test's own loopback server: requests to it are expected. */
function providerRequestsForgiven() {
  const { problems } = session;
  const kept = problems.filter((p) => !p.startsWith(`request to ${idp.issuer}`));
  problems.length = 0;
  problems.push(...kept);
}

test('the owner sets single sign-on up', async () => {
  const { page } = session;
  await page.goto(`${session.server.url}/#/sign-in`);
  await page.getByLabel('API token').fill(session.token);
  await page.getByRole('button', { name: 'Sign in with the token' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  await page.getByRole('link', { name: 'Single sign-on' }).click();
  await page.getByRole('heading', { name: 'Single sign-on' }).waitFor();
  await page.getByLabel('Issuer URL').fill(idp.issuer);
  await page.getByLabel('Client ID').fill(idp.clientId);
  await page.getByLabel('Client secret').fill(idp.clientSecret);
  await page.getByLabel('Allowed email domains').fill(`not a domain`);
  await page.getByLabel('Default role for new members').selectOption('developer');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('each allowed domain must be a domain name').waitFor();
  session.problems.length = 0; // the refused save's 422 is the browser's console error, and expected
  await page.getByLabel('Allowed email domains').fill(DOMAIN);
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved.').waitFor();
  await page.getByText(`${session.server.url}/sso/${accountId}/callback`).waitFor();
  assert.equal(await page.getByLabel('Client secret').inputValue(), '', 'the secret is not shown back');
  assert.equal((await page.content()).includes(idp.clientSecret), false);
  await session.checkPage('sso-settings');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
});

test('a new person signs in with SSO and lands in the console with the default role', async () => {
  const { page, context } = session;
  const email = `grace@${DOMAIN}`;
  idp.users.set(email, { email, email_verified: true, name: 'Grace Hopper' });
  await page.getByRole('heading', { name: 'Sign in with single sign-on' }).waitFor();
  await session.checkPage('sign-in-sso');
  await page.getByLabel('Work email').fill(email);
  await page.getByRole('button', { name: 'Sign in with SSO' }).click();
  // The provider's own page (the test's), with the email passed as a hint.
  await page.getByRole('heading', { name: 'Test identity provider' }).waitFor();
  assert.equal(await page.getByLabel('Login').inputValue(), email);
  await screenshots(page, 'sso-provider');
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  await page.getByRole('cell', { name: 'default' }).waitFor();
  assert.equal(new URL(page.url()).search, '', 'the code and state left the address bar');
  const cookie = (await context.cookies()).find((c) => c.name === 'berth_session');
  assert.ok(cookie?.httpOnly, 'an HttpOnly session cookie');
  const flow = (await context.cookies()).find((c) => c.name === 'berth_sso');
  assert.equal(flow, undefined, 'the flow cookie is gone');
  const me = (await page.evaluate(async () => (await fetch('/auth/session')).json())) as {
    data: { user: { email: string }; role: string };
  };
  assert.equal(me.data.user.email, email);
  assert.equal(me.data.role, 'developer');
  providerRequestsForgiven();
  await session.checkPage('sso-signed-in');
});

test('a callback whose sign-in is unknown shows what went wrong', async () => {
  const { page } = session;
  await page.goto(`${session.server.url}/sso/${accountId}/callback?code=stolen&state=forged`);
  await page.getByRole('heading', { name: 'Single sign-on did not complete' }).waitFor();
  await page
    .getByText(/This sign-in is unknown, used already, expired or was started in another browser/)
    .waitFor();
  session.problems.length = 0; // the refused callback's 401 is the browser's console error, and expected
  await session.checkPage('sso-refused');
  await page.getByRole('link', { name: 'Back to sign-in' }).waitFor();
  const audit = await api(`${session.server.url}/v1/audit-logs?action=sso.refused_state`, session.token);
  assert.equal(audit.body.data.audit_logs.length, 1);
});

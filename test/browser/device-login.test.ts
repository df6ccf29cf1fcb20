import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type ConsoleSession, launchChromium, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, runBerth } from '../helpers/process.ts';

// Issue 28, done-means 3: `berth login` in a process of its own shows a code; the owner, signed in to
// the console in Chromium, approves it; the CLI then lists services with the token it received. A
// second login is approved by someone signed out when the link opens (sign-in leads back to the code)
// and denied. Each page is checked with axe-core and photographed.

let db: TestDatabase;
let session: ConsoleSession;
let home: string;
const PASSWORD = 'the owner password 1';

before(async () => {
  db = await createTestDatabase();
  session = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-device-home-'));
  // The owner signs in once, through the first start's link.
  const { server, page } = session;
  await page.goto((await server.waitForOutput(/sign in:\s+(\S+)/))[1] as string);
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
});

after(async () => {
  await session?.close();
  await db?.drop();
  fs.rmSync(home, { recursive: true, force: true });
});

/** The CLI as a user runs it: a config directory of its own, output piped (no browser opened), no stdin. */
function berth(args: string[]): BerthProcess {
  return runBerth(args, {
    HOME: home,
    XDG_CONFIG_HOME: '',
    BERTH_URL: '',
    BERTH_TOKEN: '',
    BERTH_CONTEXT: '',
    BERTH_ENV: '',
    NO_COLOR: '1',
  });
}

/** What `berth login` printed for the person: the code and the address that carries it. */
async function codeShownBy(login: BerthProcess) {
  const match = await pollUntil(
    'berth login to show the code',
    async () => login.stderr().match(/enter the code ([A-Z]{4}-[A-Z]{4})\n\(or open (\S+)\)/) ?? undefined,
  );
  return { code: match[1] as string, link: match[2] as string };
}

async function approvalPage(page: Page, link: string, code: string) {
  await page.goto(link);
  await page.getByRole('heading', { name: 'Log in a device' }).waitFor();
  await page.getByText(code, { exact: true }).waitFor();
}

test('berth login: the code approved in the console, then the CLI lists services with its new token', async () => {
  const { server, token, envId, page, checkPage } = session;
  const created = await api(`${server.url}/v1/environments/${envId}/services`, token, 'POST', {
    name: 'device web',
    source: 'docker_image',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/web',
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));

  const login = berth(['login', '--url', server.url, '--context', 'device']);
  const { code, link } = await codeShownBy(login);
  assert.equal(link, `${server.url}/device?user_code=${code}`);
  assert.match(login.stderr(), new RegExp(`open ${server.url}/device and enter the code ${code}`));
  await approvalPage(page, link, code);
  await page.getByText(`A Berth command line on ${os.hostname()}`).waitFor();
  await checkPage('device-login');
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.getByText(/^Approved: berth login on /).waitFor();
  await checkPage('device-login-approved');

  assert.equal(await login.exited, 0, login.stderr());
  assert.match(
    login.stderr(),
    /Logged in to .* as context "device" \(owner@localhost, owner; 1 environment\)/,
  );
  const kept = JSON.parse(fs.readFileSync(path.join(home, '.config/berth/config.json'), 'utf8'));
  const received = kept.contexts.device.token as string;
  assert.notEqual(received, token, 'a token of its own, not the operator token');
  assert.equal(login.stderr().includes(received), false, 'the token is never printed');

  const services = berth(['services', 'ls']);
  assert.equal(await services.exited, 0, services.stderr());
  assert.match(services.stdout(), /device web/);

  // The token is the owner's, named after this machine, and listed with the account's tokens.
  const tokens = await api(`${server.url}/v1/tokens`, token);
  const made = tokens.body.data.tokens.find((t: { name: string | null }) =>
    t.name?.startsWith('berth login'),
  );
  assert.equal(made.name, `berth login on ${os.hostname()}`);
  assert.equal(made.owner.email, 'owner@localhost');
  assert.equal(made.role, 'owner');
});

test('a link opened signed out leads back to the code after sign-in; denying it stops berth login', async () => {
  const { server, checkPage } = session;
  const login = berth(['login', '--url', server.url, '--context', 'denied']);
  const { code, link } = await codeShownBy(login);
  const other = await launchChromium();
  try {
    const page = await (await other.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(link);
    await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill('owner@localhost');
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Log in a device' }).waitFor();
    await page.getByText(code, { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.getByText(/^Denied: berth login on /).waitFor();
    await page.screenshot({ path: 'test-results/console/device-login-denied-1280.png', fullPage: true });
  } finally {
    await other.close();
  }
  assert.equal(await login.exited, 3, login.stderr());
  assert.match(login.stderr(), /berth: the login was denied in the console/);
  const kept = JSON.parse(fs.readFileSync(path.join(home, '.config/berth/config.json'), 'utf8'));
  assert.equal(kept.contexts.denied, undefined, 'nothing kept');
  // The code, decided, is gone: the page says so rather than offering it again.
  await session.page.goto(link);
  await session.page.getByText(/^No login is waiting with this code/).waitFor();
  session.problems.length = 0; // the 404 that says so is the browser's console error, and expected
  await checkPage('device-login-gone');
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, screenshots, seriousViolations } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { type BerthProcess, startBerth } from '../helpers/process.ts';

// The console as a person uses it: real `berth serve`, real headless Chromium, one flow from sign-in
// to sign-out. Each page is checked with axe-core and photographed at 1280 and 360 px.

let db: TestDatabase;
let server: BerthProcess & { url: string };
let browser: Browser;
let context: BrowserContext;
let page: Page;
let token: string;
let envId: string;
/** What the page said that a person would not see: script errors, CSP refusals, failed requests. */
const problems: string[] = [];

before(async () => {
  db = await createTestDatabase();
  server = await startBerth({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
  });
  token = (await server.waitForOutput(/API token:\s+(\S+)/))[1] as string;
  envId = (await server.waitForOutput(/environment:\s+(\S+)/))[1] as string;
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Nothing may leave the machine: every request goes to the server that served the console.
  page.on('request', (r) => {
    if (!r.url().startsWith(server.url) && !r.url().startsWith('data:'))
      problems.push(`request to ${r.url()}`);
  });
});

after(async () => {
  await browser?.close();
  await server?.kill();
  await db?.drop();
});

/** The page is accessible (no serious or critical axe violation) at both widths; then photographed. */
async function checkPage(name: string): Promise<void> {
  for (const width of [1280, 360]) {
    await page.setViewportSize({ width, height: 800 });
    const violations = await seriousViolations(page);
    assert.deepEqual(
      violations.map(
        (v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
      ),
      [],
      `${name} at ${width} px`,
    );
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await screenshots(page, name);
  assert.deepEqual(problems, [], `${name}: the page reported problems`);
}

test('the console is served at / with a Content-Security-Policy', async () => {
  const response = await fetch(`${server.url}/`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /text\/html/);
  const csp = response.headers.get('content-security-policy') ?? '';
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /connect-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  // The first-start banner says where it is.
  assert.match(server.stdout(), new RegExp(`Console: ${server.url}/`));
});

test('sign in: a wrong token is refused in place, the right one is kept in the session only', async () => {
  await page.goto(`${server.url}/`);
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  await checkPage('sign-in');
  await page.getByLabel('API token').fill('00000000-0000-4000-8000-000000000000');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('Your API token was not accepted').waitFor();
  problems.length = 0; // the refused sign-in's 401 is the browser's console error, and expected
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.token')), token);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.deepEqual(await context.cookies(), []);
  await page.getByRole('cell', { name: 'default' }).waitFor();
  await checkPage('environments');
});

test('an environment: its live identity, state and (empty) services list', async () => {
  await page.getByRole('link', { name: 'default' }).click();
  await page.getByRole('heading', { name: 'Environment default' }).waitFor();
  await page.getByText('Ingress host').waitFor();
  await page.getByText('No service here yet').waitFor();
  assert.match(page.url(), new RegExp(`#/envs/${envId}$`));
  await checkPage('environment-empty');
});

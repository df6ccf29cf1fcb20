import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { type BerthProcess, firstStartOf, REPO, startBerth } from './process.ts';

/**
 * Debian's chromium, driven by playwright-core: no browser is downloaded. BERTH_TEST_CHROMIUM names
 * another binary.
 */
export const CHROMIUM = process.env.BERTH_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Headless, and quiet: nothing this browser does may leave the machine. */
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/** Where the tests write what a reviewer looks at (not committed). */
export const SCREENSHOTS = path.join(REPO, 'test-results/console');

export const WIDTHS = [1280, 360] as const;

/** A full-page screenshot of the page at each width, as `<name>-<width>.png`. */
export async function screenshots(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const before = page.viewportSize();
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 800 });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
  }
  if (before) await page.setViewportSize(before);
}

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * axe-core run in the page (injected through the DevTools protocol, which the page's CSP does not
 * govern): the serious and critical violations, at the current width.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * A real `berth serve` (its first-start token and environment) and a Chromium page at 1280 px, with
 * what the page said that a person would not see (script errors, CSP refusals, requests that leave the
 * server) collected in `problems`.
 */
export interface ConsoleSession {
  server: BerthProcess & { url: string };
  token: string;
  envId: string;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  problems: string[];
  /** The page is accessible (no serious or critical axe violation) at both widths; then photographed. */
  checkPage(name: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The session's tab signed in with its token, as a sign-in leaves it, on the environments page the app
 * then moves to: once it is there, nothing moves the tab but the test (a test's own navigation could
 * otherwise lose to that move).
 */
export async function signInWithToken(c: ConsoleSession): Promise<void> {
  await c.page.goto(`${c.server.url}/`);
  await c.page.evaluate((token) => sessionStorage.setItem('berth.token', token), c.token);
  await c.page.reload();
  await c.page.getByRole('heading', { name: 'Environments' }).waitFor();
}

export async function startConsole(env: Record<string, string | undefined>): Promise<ConsoleSession> {
  const server = await startBerth(env);
  const { token, envId } = await firstStartOf(server);
  const browser = await launchChromium();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Nothing may leave the machine: every request goes to the server that served the console.
  page.on('request', (r) => {
    if (!r.url().startsWith(server.url) && !r.url().startsWith('data:'))
      problems.push(`request to ${r.url()}`);
  });
  const checkPage = async (name: string) => {
    for (const width of WIDTHS) {
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
  };
  const close = async () => {
    await browser.close();
    await server.kill();
  };
  return { server, token, envId, browser, context, page, problems, checkPage, close };
}

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { REPO } from './process.ts';

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

/**
 * The web console's first screens from a cold browser, and its bundle. `berth serve` runs as its own
 * process (embedded database, BENCH_CONSOLE_SERVICES services); each round launches a new Chromium
 * (Debian's, as the browser tests use), so nothing is cached: no HTTP cache, no compiled code.
 *
 * - sign_in_ms: `/` opened without a token, until the sign-in form is rendered (Preact attaches its
 *   handlers as it renders) and no long task is still running: what a new user waits for.
 * - services_ms: `/#/envs/{id}` opened signed in (the token already in the tab's sessionStorage, as a
 *   sign-in leaves it), until every row of the services list shows with its live status: the screen a
 *   user works from. `services_requests` counts the API requests it took.
 * - bundle: every file of console/dist (what the first load fetches), raw and gzipped.
 *
 * Times are from the navigation's start (the page's own clock), the median of BENCH_ROUNDS rounds
 * (3). Writes bench/results/console.json and prints it as one JSON line (`bench/run.ts`, row
 * `console`, reads it). Needs the console built (`npm run build:console`).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { CONSOLE_DIST } from '../src/api/console.ts';
import { launchChromium } from '../test/helpers/browser.ts';
import { firstStartOf, startBerth } from '../test/helpers/process.ts';
import { median } from './median.ts';
import { BENCH_SERVICE } from './service.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPORT_FILE = path.join(HERE, 'results', 'console.json');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** One page of the console's list (it reads 20 at a time). */
const SERVICES = Number(process.env.BENCH_CONSOLE_SERVICES ?? 20);
const TARGET_MS = 1000;

/** The files a first load fetches, as served: sizes raw and gzipped (what a compressing proxy sends). */
function bundleSize() {
  const files = [
    'index.html',
    ...fs.readdirSync(path.join(CONSOLE_DIST, 'assets')).map((f) => `assets/${f}`),
  ].map((file) => {
    const bytes = fs.readFileSync(path.join(CONSOLE_DIST, file));
    return { file, bytes: bytes.length, gzip_bytes: zlib.gzipSync(bytes).length };
  });
  const sum = (pick: (f: (typeof files)[number]) => number) => files.reduce((n, f) => n + pick(f), 0);
  return { files, bytes: sum((f) => f.bytes), gzip_bytes: sum((f) => f.gzip_bytes) };
}

/**
 * Runs in the page before its own scripts: notes when `selector` first matches (a MutationObserver
 * sees each render) and when the last long task ended, on the page's clock (0 = navigation start).
 */
const probe = (selector: string) => `
  window.__bench = { shown: null, longTaskEnd: 0 };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      window.__bench.longTaskEnd = Math.max(window.__bench.longTaskEnd, e.startTime + e.duration);
  }).observe({ type: 'longtask', buffered: true });
  new MutationObserver(() => {
    if (window.__bench.shown === null && document.querySelector(${JSON.stringify(selector)}))
      window.__bench.shown = performance.now();
  }).observe(document, { childList: true, subtree: true, characterData: true });
`;

interface Probed {
  __bench: { shown: number; longTaskEnd: number };
}

interface Shown {
  ms: number;
  api_requests: number;
}

/** A new browser (nothing cached), one page, until `selector` shows and the main thread is free. */
async function firstScreen(url: string, selector: string, token?: string): Promise<Shown> {
  const browser = await launchChromium();
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    if (token) await page.addInitScript(`sessionStorage.setItem('berth.token', ${JSON.stringify(token)});`);
    await page.addInitScript(probe(selector));
    let apiRequests = 0;
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/v1/')) apiRequests++;
    });
    await page.goto(url);
    // Functions, not strings: the console's CSP refuses eval, which a string predicate needs.
    await page.waitForFunction(() => (globalThis as unknown as Probed).__bench.shown !== null, undefined, {
      timeout: 30_000,
    });
    await page.waitForLoadState('networkidle');
    const { shown, longTaskEnd } = await page.evaluate(() => (globalThis as unknown as Probed).__bench);
    return { ms: Math.round(Math.max(shown, longTaskEnd)), api_requests: apiRequests };
  } finally {
    await browser.close();
  }
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: HERE, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

async function main() {
  if (!fs.existsSync(path.join(CONSOLE_DIST, 'index.html')))
    throw new Error('the console is not built: run `npm run build:console` first');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-console-'));
  const berth = await startBerth({
    BERTH_DATA_DIR: dataDir,
    BERTH_DATABASE_URL: '',
    BERTH_LOG_LEVEL: 'warn',
  });
  try {
    const { token, envId } = await firstStartOf(berth);
    for (let i = 0; i < SERVICES; i++) {
      const res = await fetch(`${berth.url}/v1/environments/${envId}/services`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...BENCH_SERVICE, name: `bench console ${'x'.repeat((i % 40) + 1)}` }),
      });
      if (!res.ok) throw new Error(`creating service ${i}: HTTP ${res.status} ${await res.text()}`);
    }
    const rows = Math.min(SERVICES, 20);
    const rounds: Record<string, number>[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const signIn = await firstScreen(`${berth.url}/`, '#token');
      // The last row's run status: the list is there with its live figures, however many reads it took.
      const services = await firstScreen(
        `${berth.url}/#/envs/${envId}`,
        `table tbody tr:nth-child(${rows}) td:nth-child(4)`,
        token,
      );
      const bundle = bundleSize();
      rounds.push({
        sign_in_ms: signIn.ms,
        services_ms: services.ms,
        services_requests: services.api_requests,
        bundle_kb: Math.round(bundle.bytes / 102.4) / 10,
        bundle_gzip_kb: Math.round(bundle.gzip_bytes / 102.4) / 10,
        load_average_1m: os.loadavg()[0] as number,
      });
      process.stderr.write(`[bench console] round ${r + 1}: ${JSON.stringify(rounds.at(-1))}\n`);
    }
    const keys = Object.keys(rounds[0] ?? {});
    const med = Object.fromEntries(keys.map((k) => [k, median(rounds.map((r) => r[k] as number))]));
    const report = {
      benchmark: 'console first screens, cold browser (issue 31)',
      date: new Date().toISOString(),
      commit: gitCommit(),
      machine: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? 'unknown' },
      settings: { rounds: ROUNDS, services: SERVICES },
      target: `sign_in_ms and services_ms <= ${TARGET_MS}`,
      met: (med.sign_in_ms as number) <= TARGET_MS && (med.services_ms as number) <= TARGET_MS,
      bundle: bundleSize(),
      rounds,
      median: med,
    };
    fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
    fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify(report));
  } finally {
    await berth.kill();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();

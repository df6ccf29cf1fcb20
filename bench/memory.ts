/**
 * `npm run bench` (second step): the server's memory under mixed load, on the embedded database and on
 * PostgreSQL. For each, `berth serve` runs as its own process on a fresh database; it gets a warm-up of
 * the same length and mix as the measured load, then idles. Then: RSS `before`, where it goes
 * (`rss_split_mb`: V8's heap, external memory, the rest, from a diagnostic report), with a heap snapshot
 * taken before that idle; the measured load (lists, reads, creates with deploys, bodies nested too deep, bad queries and
 * cursors); RSS `after_load`; the same idle; RSS `after_idle`, its split and a second heap snapshot.
 * `returned` says whether the RSS after idle is within 10% of `before`. A heap snapshot collects the
 * garbage first, so `heap_mb` is what the process really holds; `heap_growth` lists the constructors
 * whose objects grew most between the two (a leak shows there as a count that keeps climbing).
 *
 * Why "before" is taken after a warm-up: RSS at boot is not a fair start. Heap and caches fill on first
 * use, and the embedded database's WebAssembly memory (`wasm_memory_mb`: PGlite's Postgres heap, which
 * grows and is never given back, as WebAssembly memories cannot shrink) reaches its working size only
 * under load. `rss_mb.boot` is reported as well.
 *
 * Writes bench/results/memory.json. Settings: BENCH_MEMORY_LOAD_S (default 60), BENCH_MEMORY_IDLE_S (20),
 * BENCH_CONNECTIONS (20), BENCH_MEMORY_DATABASES (embedded,postgres), BENCH_POSTGRES_URL (an admin
 * connection; the run creates and drops a database of its own).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type AutocannonRequest } from 'autocannon';
import { postgresDatabase } from './process.ts';
import { BENCH_SERVICE } from './service.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPORT_FILE = path.join(HERE, 'results', 'memory.json');
const LOAD_S = Number(process.env.BENCH_MEMORY_LOAD_S ?? 60);
const IDLE_S = Number(process.env.BENCH_MEMORY_IDLE_S ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const DATABASES = (process.env.BENCH_MEMORY_DATABASES ?? 'embedded,postgres').split(',');
const MB = 1024 * 1024;

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]) / 102.4) / 10;
}

const mb = (bytes: number) => Math.round(bytes / (MB / 10)) / 10;

interface HeapSummary {
  totalMb: number;
  wasmMemoryMb: number;
  /** Per constructor (objects, closures) or kind (strings, arrays, code...): count and bytes. */
  byName: Map<string, { count: number; bytes: number }>;
}

/** Reads a .heapsnapshot: self sizes summed per constructor name. */
function summarize(file: string): HeapSummary {
  const snapshot = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const byName = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  let wasm = 0;
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    const type = types[snapshot.nodes[i + typeAt] as number] as string;
    const name = snapshot.strings[snapshot.nodes[i + nameAt] as number] as string;
    const bytes = snapshot.nodes[i + sizeAt] as number;
    total += bytes;
    // WebAssembly memories are ArrayBuffer backing stores of a size no JavaScript value comes near.
    if (name === 'system / JSArrayBufferData' && bytes > 16 * MB) wasm += bytes;
    const key = type === 'object' || type === 'closure' || type === 'native' ? name : `(${type})`;
    const entry = byName.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += bytes;
    byName.set(key, entry);
  }
  return { totalMb: mb(total), wasmMemoryMb: mb(wasm), byName };
}

/** The constructors whose objects grew most (bytes) from `a` to `b`. */
function growth(a: HeapSummary, b: HeapSummary, top = 8) {
  return [...b.byName]
    .map(([name, after]) => {
      const before = a.byName.get(name) ?? { count: 0, bytes: 0 };
      return {
        name,
        count_before: before.count,
        count_after: after.count,
        kb_growth: Math.round((after.bytes - before.bytes) / 1024),
      };
    })
    .sort((x, y) => y.kb_growth - x.kb_growth)
    .slice(0, top);
}

/**
 * Sends `signal` to the server, which answers by writing a file (a heap snapshot, a diagnostic report)
 * into `dir`; returns what `read` makes of that file once it can be read whole.
 */
async function askForFile<T>(
  child: ChildProcess,
  dir: string,
  signal: NodeJS.Signals,
  read: (file: string) => T,
): Promise<T> {
  const known = new Set(fs.readdirSync(dir));
  child.kill(signal);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const file = fs.readdirSync(dir).find((f) => !known.has(f) && /\.(json|heapsnapshot)$/.test(f));
    if (file) {
      try {
        const value = read(path.join(dir, file));
        fs.rmSync(path.join(dir, file));
        return value;
      } catch {
        // Still being written.
      }
    }
    if (Date.now() > deadline) throw new Error(`the server wrote no file after ${signal}`);
    await sleep(250);
  }
}

/** A heap snapshot (the server runs with --heapsnapshot-signal=SIGUSR2), summarized. */
const heapSnapshot = (child: ChildProcess, dir: string) => askForFile(child, dir, 'SIGUSR2', summarize);

/** Where the RSS goes (a Node.js diagnostic report, asked for with SIGTTIN): V8's heap, external memory, the rest. */
const memoryReport = (child: ChildProcess, dir: string) =>
  askForFile(child, dir, 'SIGTTIN', (file) => {
    const report = JSON.parse(fs.readFileSync(file, 'utf8')) as {
      javascriptHeap: { totalCommittedMemory: number; usedMemory: number; externalMemory: number };
      resourceUsage: { rss: number };
    };
    const heap = report.javascriptHeap;
    return {
      v8_committed: mb(heap.totalCommittedMemory),
      v8_used: mb(heap.usedMemory),
      external: mb(heap.externalMemory),
      rest: mb(report.resourceUsage.rss - heap.totalCommittedMemory - heap.externalMemory),
    };
  });

async function measure(database: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-memory-'));
  const postgres = database === 'postgres' ? await postgresDatabase('berth_bench') : undefined;
  // Heap snapshots land in the working directory: the run's own.
  const child = spawn(
    process.execPath,
    [
      '--heapsnapshot-signal=SIGUSR2',
      '--report-on-signal',
      '--report-signal=SIGTTIN',
      path.join(HERE, '..', 'bin', 'berth.js'),
      'serve',
    ],
    {
      cwd: dir,
      env: {
        ...process.env,
        BERTH_DATA_DIR: path.join(dir, 'data'),
        BERTH_DATABASE_URL: postgres?.url ?? '',
        BERTH_PORT: '0',
        BERTH_LOG_LEVEL: 'warn',
        BERTH_SIM_STEP_MS: '10',
        BERTH_RATE_LIMIT_PER_MIN: '10000000',
        BERTH_AUTH_FAILURES_PER_MIN: '10000000',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  try {
    const deadline = Date.now() + 120_000;
    while (!/environment:\s+[0-9a-f-]{36}/.test(out) || !/listening on http/.test(out)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`berth did not start: ${out}`);
      await sleep(100);
    }
    const pid = child.pid as number;
    const boot = rssMb(pid);
    const base = (/listening on (http:\/\/\S+)/.exec(out) as RegExpExecArray)[1] as string;
    const token = (/API token:\s+([0-9a-f-]{36})/.exec(out) as RegExpExecArray)[1] as string;
    const envId = (/environment:\s+([0-9a-f-]{36})/.exec(out) as RegExpExecArray)[1] as string;
    const env = `/v1/environments/${envId}`;
    const service = { ...BENCH_SERVICE, deploy_now: true };
    let n = 0;
    const load = (seconds: number) =>
      autocannon({
        url: base,
        connections: CONNECTIONS,
        duration: seconds,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        requests: [
          { method: 'GET', path: `${env}/services?limit=20` },
          { method: 'GET', path: env },
          {
            method: 'POST',
            path: `${env}/services`,
            setupRequest: (request: AutocannonRequest) => ({
              ...request,
              body: JSON.stringify({
                ...service,
                name: `Bench ${'abcdefghij'[n++ % 10]} ${'klmnopqrst'[Math.floor(n / 10) % 10]}`,
              }),
            }),
          },
          { method: 'POST', path: `${env}/services`, body: `${'['.repeat(10_000)}${']'.repeat(10_000)}` },
          { method: 'GET', path: `${env}/services?limit=1&limit=2&cursor=%%%` },
          { method: 'GET', path: '/v1/audit-logs?cursor=MDAwMC0wMS0wMVQwMDowMDowMC4wMDBa' },
        ],
      });
    await load(LOAD_S);
    // The first snapshot before the idle: building one takes native memory that the C allocator keeps,
    // and that must not count as growth under the measured load. Taking it collects the garbage first.
    const heapBefore = await heapSnapshot(child, dir);
    await sleep(IDLE_S * 1000);
    // "before" is read in the state "after_idle" will be read in: after the same load and the same idle.
    const before = rssMb(pid);
    const splitBefore = await memoryReport(child, dir);
    const result = await load(LOAD_S);
    const afterLoad = rssMb(pid);
    await sleep(IDLE_S * 1000);
    const afterIdle = rssMb(pid);
    const splitAfter = await memoryReport(child, dir);
    const heapAfter = await heapSnapshot(child, dir);
    return {
      requests: result.requests.total,
      errors: result.errors,
      rss_mb: { boot, before, after_load: afterLoad, after_idle: afterIdle },
      returned: afterIdle <= before * 1.1,
      rss_split_mb: { before: splitBefore, after_idle: splitAfter },
      heap_mb: { before: heapBefore.totalMb, after_idle: heapAfter.totalMb },
      wasm_memory_mb: { before: heapBefore.wasmMemoryMb, after_idle: heapAfter.wasmMemoryMb },
      heap_growth: growth(heapBefore, heapAfter),
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    await postgres?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const report: Record<string, unknown> = { load_s: LOAD_S, idle_s: IDLE_S, connections: CONNECTIONS };
for (const database of DATABASES) {
  report[database] = await measure(database);
  console.log(JSON.stringify({ [database]: report[database] }));
}
fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);

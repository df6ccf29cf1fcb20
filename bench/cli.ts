/**
 * `npm run bench` (third step): how long the `berth` command takes, as a user starts it, next to a bare
 * Node start measured in the same rounds (issue 31's CLI rows). Each command runs once as a warm-up,
 * then once per round (BENCH_ROUNDS, default 3); the median wall time is reported.
 *
 * Rows: `berth --version` on Node 24, and on the machine's older Node (`node` on PATH without
 * node_modules/.bin: it runs bin/berth.js again on Node 24 unless the command needs no Node 24) and
 * through `npx berth` (npm's own start is most of it); `berth services ls -o json` against a running
 * embedded `berth serve` with 20 services; TAB completion in bash of a command (`berth se<TAB>`) and of
 * a service name (`berth deploy <TAB>`, names kept from a minute ago, and with none kept: asked of the
 * server). Writes bench/results/cli.json and prints a Markdown table.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { median } from './median.ts';
import { BENCH_SERVICE } from './service.ts';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const REPO = path.join(HERE, '..');
const BERTH_BIN = path.join(REPO, 'bin', 'berth.js');
const REPORT_FILE = path.join(HERE, 'results', 'cli.json');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SERVICES = 20;

const log = (message: string) => process.stderr.write(`[bench cli] ${message}\n`);

/** PATH as a user's shell has it: without the node_modules/.bin (and its Node 24) that npm run puts first. */
const USER_PATH = (process.env.PATH ?? '')
  .split(path.delimiter)
  .filter((dir) => !dir.endsWith(`node_modules${path.sep}.bin`))
  .join(path.delimiter);

function machineNode(): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v node'], { env: { PATH: USER_PATH }, encoding: 'utf8' });
  const node = found.stdout.trim();
  if (!node) return undefined;
  const major = Number(
    execFileSync(node, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }),
  );
  return major < 24 ? node : undefined;
}

/** One run's wall time in milliseconds; fails the bench when the command fails. */
function wall(command: string, args: string[], env: Record<string, string>): number {
  const started = performance.now();
  const res = spawnSync(command, args, { env: { ...process.env, ...env }, encoding: 'utf8', cwd: REPO });
  const ms = performance.now() - started;
  if (res.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${res.status}: ${res.stderr}`);
  return ms;
}

interface Case {
  row: string;
  target_ms?: number;
  command: string;
  args: string[];
  env?: Record<string, string>;
  /** Before each run (not timed). */
  before?: () => void;
}

async function startServer(home: string): Promise<{ child: ChildProcess; url: string; token: string }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-cli-'));
  const child = spawn(process.execPath, [BERTH_BIN, 'serve'], {
    env: { ...process.env, BERTH_DATA_DIR: dataDir, BERTH_PORT: '0', BERTH_LOG_LEVEL: 'warn', HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.once('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const deadline = Date.now() + 120_000;
  for (;;) {
    const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
    const token = /API token:\s+([0-9a-f-]{36})/.exec(out)?.[1];
    const envId = /environment:\s+([0-9a-f-]{36})/.exec(out)?.[1];
    if (url && token && envId) {
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      for (;;) {
        const env = (await (await fetch(`${url}/v1/environments/${envId}`, { headers })).json()) as {
          data: { environment: { state: string } };
        };
        if (env.data.environment.state === 'available') break;
        await sleep(50);
      }
      for (let i = 0; i < SERVICES; i++) {
        const res = await fetch(`${url}/v1/environments/${envId}/services`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ ...BENCH_SERVICE, name: `bench cli ${String.fromCharCode(97 + i)}` }),
        });
        if (!res.ok) throw new Error(`creating a service answered ${res.status}: ${await res.text()}`);
      }
      return { child, url, token };
    }
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`berth serve did not start: ${out}`);
    await sleep(20);
  }
}

async function main(): Promise<void> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-cli-home-'));
  const server = await startServer(home);
  try {
    const user = {
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, 'config'),
      XDG_CACHE_HOME: path.join(home, 'cache'),
      BERTH_URL: server.url,
      BERTH_TOKEN: server.token,
      BERTH_ENV: '',
      BERTH_CONTEXT: '',
    };
    const script = path.join(home, 'berth.bash');
    fs.writeFileSync(
      script,
      execFileSync(process.execPath, [BERTH_BIN, 'completion', 'bash'], { encoding: 'utf8' }),
    );
    const tab = (words: string) =>
      `source '${script}'; COMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _berth_complete; test \${#COMPREPLY[@]} -gt 0`;
    const forgetNames = () => fs.rmSync(path.join(home, 'cache'), { recursive: true, force: true });
    const node = machineNode();
    const cases: Case[] = [
      { row: 'baseline: bare `node -e 0` (Node 24)', command: process.execPath, args: ['-e', '0'] },
      {
        row: '`berth --version` (Node 24)',
        target_ms: 150,
        command: process.execPath,
        args: [BERTH_BIN, '--version'],
      },
      ...(node
        ? [
            {
              row: `\`berth --version\` (the machine's ${node})`,
              command: node,
              args: [BERTH_BIN, '--version'],
            },
          ]
        : []),
      {
        row: '`berth services ls -o json` (Node 24)',
        target_ms: 400,
        command: process.execPath,
        args: [BERTH_BIN, 'services', 'ls', '-o', 'json'],
      },
      ...(node
        ? [
            {
              row: `\`berth services ls -o json\` (the machine's ${node})`,
              command: node,
              args: [BERTH_BIN, 'services', 'ls', '-o', 'json'],
            },
          ]
        : []),
      {
        row: "`npx berth --version` (npx on the user's PATH)",
        command: 'npx',
        args: ['berth', '--version'],
        env: { PATH: USER_PATH },
      },
      {
        row: 'bash TAB: `berth se<TAB>`',
        target_ms: 150,
        command: 'bash',
        args: ['--norc', '--noprofile', '-c', tab('berth se')],
      },
      {
        row: 'bash TAB: `berth deploy <TAB>`, names kept',
        target_ms: 150,
        command: 'bash',
        args: ['--norc', '--noprofile', '-c', tab("berth deploy ''")],
      },
      {
        row: 'bash TAB: `berth deploy <TAB>`, none kept (asks the server)',
        command: 'bash',
        args: ['--norc', '--noprofile', '-c', tab("berth deploy ''")],
        before: forgetNames,
      },
    ];
    const times = new Map<Case, number[]>(cases.map((c) => [c, []]));
    for (const c of cases) {
      c.before?.();
      wall(c.command, c.args, { ...user, ...c.env });
    }
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round} of ${ROUNDS}`);
      for (const c of cases) {
        c.before?.();
        times.get(c)?.push(wall(c.command, c.args, { ...user, ...c.env }));
      }
    }
    const rows = cases.map((c) => {
      const ms = median(times.get(c) ?? []);
      return {
        row: c.row,
        median_ms: Math.round(ms),
        runs_ms: (times.get(c) ?? []).map(Math.round),
        target_ms: c.target_ms ?? null,
        met: c.target_ms === undefined ? null : ms <= c.target_ms,
      };
    });
    const report = { at: new Date().toISOString(), rounds: ROUNDS, load: os.loadavg(), rows };
    fs.mkdirSync(path.dirname(REPORT_FILE), { recursive: true });
    fs.writeFileSync(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);
    const lines = [
      '| CLI row (wall, median) | ms | target | met |',
      '|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| ${r.row} | ${r.median_ms} | ${r.target_ms === null ? '' : `<= ${r.target_ms}`} | ${r.met === null ? '' : r.met ? '**yes**' : 'no'} |`,
      ),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
    fs.rmSync(home, { recursive: true, force: true });
  }
}

await main();

import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pollUntil, StopPolling } from './poll.ts';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BERTH_BIN = path.join(REPO, 'bin/berth.js');

export interface BerthProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Runs the real CLI as a user would: `node bin/berth.js ...` with the given environment, on this Node or
 * on another one (`node`, e.g. the machine's older /usr/bin/node), with `stdin` piped in if given.
 */
export function runBerth(
  args: string[],
  env: Record<string, string | undefined>,
  options: { node?: string; stdin?: string } = {},
): BerthProcess {
  const child = spawn(options.node ?? process.execPath, [BERTH_BIN, ...args], {
    cwd: REPO,
    env: { ...process.env, BERTH_LOG_LEVEL: 'warn', ...env },
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (options.stdin !== undefined) child.stdin?.end(options.stdin);
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    err += chunk;
  });
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  // 'close' comes after the last output is read ('exit' may come before it).
  let closed = false;
  child.on('close', () => {
    closed = true;
  });
  const proc: BerthProcess = {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForOutput: (pattern, timeoutMs = 90_000) =>
      pollUntil(
        `output matching ${pattern}`,
        async () => {
          const match = out.match(pattern);
          if (match) return match;
          if (closed) {
            throw new StopPolling(`berth exited (${child.exitCode ?? child.signalCode}): ${err || out}`);
          }
          return undefined;
        },
        { timeoutMs },
      ),
    kill: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  return proc;
}

/** Starts `berth serve` on a free port and waits until it listens; returns its base URL too. */
export async function startBerth(
  env: Record<string, string | undefined>,
): Promise<BerthProcess & { url: string }> {
  return listening(runBerth(['serve'], serveEnv(env)));
}

/** What `berth serve` runs with in tests, unless `env` says otherwise: a free port, short sim steps. */
export function serveEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  return { BERTH_PORT: '0', BERTH_SIM_STEP_MS: '20', ...env };
}

/**
 * How long a `berth serve` may take to listen: a start is 4-5 CPU seconds (an embedded one loads and
 * opens PGlite), and at load 25 on two cores it gets a twelfth of one: about 60 s, and 90 s was seen.
 */
const LISTEN_MS = 180_000;

/** A `berth serve` once it listens (over `scheme`), with its base URL. */
export async function listening(
  proc: BerthProcess,
  scheme: 'http' | 'https' = 'http',
): Promise<BerthProcess & { url: string }> {
  const match = await proc.waitForOutput(new RegExp(`Berth is listening on (${scheme}://\\S+)`), LISTEN_MS);
  return Object.assign(proc, { url: match[1] as string });
}

export async function api(url: string, token: string, method = 'GET', body?: unknown) {
  const res = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** One item of GET .../services/{id}/dependencies. */
export interface Dependency {
  kind: string;
  id: string;
  state: string;
  attributes: Record<string, string>;
}

/** What a running Berth made of a service's dependencies (`envUrl` ends with /v1/environments/{id}). */
export async function dependenciesOf(
  envUrl: string,
  token: string,
  serviceId: string,
): Promise<Dependency[]> {
  const res = await api(`${envUrl}/services/${serviceId}/dependencies`, token);
  if (res.status !== 200)
    throw new Error(`GET dependencies answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data.dependencies;
}

/** The first-start output of a server: its API token and environment, once the environment is available. */
export async function firstStartOf(server: BerthProcess & { url: string }) {
  const token = (await server.waitForOutput(/API token:\s+([0-9a-f-]{36})/))[1] as string;
  const envId = (await server.waitForOutput(/environment:\s+([0-9a-f-]{36})/))[1] as string;
  const envUrl = `${server.url}/v1/environments/${envId}`;
  await pollUntil('the environment to be available', async () =>
    (await api(envUrl, token)).body.data.environment.state === 'available' ? true : undefined,
  );
  return { token, envId, envUrl };
}

/** Polls a deployment until it is success or failed, and returns it. */
export async function deploymentEnd(
  baseUrl: string,
  token: string,
  deploymentId: string,
  timeoutMs = 60_000,
) {
  return pollUntil(
    `deployment ${deploymentId} to end`,
    async () => {
      const d = (await api(`${baseUrl}/v1/deployments/${deploymentId}`, token)).body.data.deployment;
      return d.state === 'success' || d.state === 'failed' ? d : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

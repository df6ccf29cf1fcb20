/**
 * Readiness of one container: running, and its ops.json health check passing (http: a 2xx or 3xx from
 * the path; tcp and grpc: the port accepts a connection; shell: the command exits 0 inside the
 * container). Without a health check a container that listens on a port is ready once the port
 * accepts connections; one without a port once it runs.
 * @module
 */
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { HealthCheck } from '../../domain/ops-json.ts';

export interface Target {
  container: Docker.Container;
  ip: string;
}

/** A replica stopped during its rollout: the deployment fails at once, with this target's output. */
export class ContainerExited extends Error {
  readonly target: Target;
  constructor(message: string, target: Target) {
    super(message);
    this.target = target;
  }
}

async function tcpOpen(ip: string, port: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: ip, port, signal });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function httpOk(url: string, signal: AbortSignal): Promise<boolean> {
  try {
    const res = await fetch(url, { signal, redirect: 'manual' });
    await res.body?.cancel();
    return res.status >= 200 && res.status < 400;
  } catch {
    return false;
  }
}

/** A check's verdict; a failed shell check carries what the command printed. */
type Verdict = boolean | { output: string };

/** The last characters of a check command's output that a failure reason shows. */
const MAX_CHECK_OUTPUT = 500;

async function shellOk(container: Docker.Container, command: string, signal: AbortSignal): Promise<Verdict> {
  const exec = await container.exec({
    Cmd: ['/bin/sh', '-c', command],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  const output = new PassThrough();
  let printed = '';
  output.on('data', (chunk: Buffer) => {
    printed = (printed + chunk.toString('utf8')).slice(-MAX_CHECK_OUTPUT);
  });
  container.modem.demuxStream(stream, output, output);
  while (!signal.aborted) {
    const info = await exec.inspect();
    if (!info.Running) return info.ExitCode === 0 ? true : { output: printed.trim() };
    await sleep(100, undefined, { signal }).catch(() => undefined);
  }
  return { output: printed.trim() };
}

/** `signal`: the rollout was abandoned; the check then fails at once (the caller sees the abort). */
export async function checkOnce(
  target: Target,
  check: HealthCheck | null,
  port: number | null,
  signal: AbortSignal,
): Promise<Verdict> {
  const within = AbortSignal.any([signal, AbortSignal.timeout((check?.timeout ?? 10) * 1000)]);
  const checkPort = check?.port ?? port;
  if (!check) return checkPort ? tcpOpen(target.ip, checkPort, within) : true;
  switch (check.type) {
    case 'http':
      return checkPort ? httpOk(`http://${target.ip}:${checkPort}${check.path ?? '/'}`, within) : false;
    case 'tcp':
    case 'grpc':
      return checkPort ? tcpOpen(target.ip, checkPort, within) : false;
    case 'shell':
      return shellOk(target.container, check.command ?? 'true', within);
  }
}

/**
 * The first round of checks goes at once; the pause before each next one doubles from FIRST_PAUSE_MS up
 * to MAX_PAUSE_MS: a replica that answers soon is seen soon, one that takes long costs few probes.
 */
const FIRST_PAUSE_MS = 10;
const MAX_PAUSE_MS = 250;

/** The container an event line is about ('' when it is not one). */
function idOf(line: string): string {
  try {
    return String((JSON.parse(line) as { id?: string }).id ?? '');
  } catch {
    return '';
  }
}

/**
 * Replicas that stop, as the Engine's event stream reports them from the moment it is opened; what
 * stopped before is read once from each container. Replicas roll out without a restart policy, so an
 * exit stays an exit (with its code) instead of a crash loop that looks alive; a restart count says the
 * same of one that was restarted anyway. `onExit` is called at once.
 */
async function watchExits(
  docker: Docker,
  targets: Target[],
  onExit: () => void,
): Promise<{ exited: () => ContainerExited | undefined; close: () => void }> {
  let exited: ContainerExited | undefined;
  const exit = async (target: Target) => {
    if (exited) return;
    const info = await target.container.inspect().catch(() => null);
    exited = new ContainerExited(`a replica exited with code ${info?.State.ExitCode ?? 'unknown'}`, target);
    onExit();
  };
  const byId = new Map(targets.map((t) => [t.container.id, t]));
  const events = (await docker.getEvents({
    filters: { type: ['container'], event: ['die'], container: [...byId.keys()] },
  })) as NodeJS.ReadableStream & { destroy(): void };
  let pending = '';
  events.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const target = byId.get(idOf(line));
      if (target) void exit(target);
    }
  });
  events.on('error', () => undefined);
  for (const target of targets) {
    const info = await target.container.inspect();
    const { State: state } = info;
    if (!state.Running || state.Restarting || info.RestartCount > 0) await exit(target);
  }
  return { exited: () => exited, close: () => events.destroy() };
}

/**
 * Waits until every target is ready, or says why not by the deadline; a replica that exits fails the
 * wait at once. Throws the signal's reason as soon as it aborts: a worker that lost its job must not wait
 * out the deploy timeout, nor act on the outcome.
 */
export async function waitReady(
  docker: Docker,
  targets: Target[],
  check: HealthCheck | null,
  port: number | null,
  deadline: number,
  signal: AbortSignal,
  onReady: (target: Target) => void = () => undefined,
): Promise<{ ok: true } | { ok: false; reason: string; exited?: Target }> {
  // An exit ends the pause between rounds (and the checks under way) at once.
  const stopped = new AbortController();
  const watch = await watchExits(docker, targets, () => stopped.abort());
  const probing = AbortSignal.any([signal, stopped.signal]);
  const exitedNow = () => {
    const exit = watch.exited();
    return exit ? { ok: false as const, reason: exit.message, exited: exit.target } : undefined;
  };
  try {
    const pending = new Set(targets);
    let last = 'not ready';
    let pause = FIRST_PAUSE_MS;
    while (pending.size > 0) {
      signal.throwIfAborted();
      const early = exitedNow();
      if (early) return early;
      await Promise.all(
        [...pending].map(async (target) => {
          try {
            const verdict = await checkOnce(target, check, port, probing);
            if (verdict === true) {
              pending.delete(target);
              onReady(target);
            } else {
              const printed =
                typeof verdict === 'object' && verdict.output ? `; it printed: ${verdict.output}` : '';
              last = check
                ? `the ${check.type} health check did not pass${printed}`
                : `port ${port} did not accept connections`;
            }
          } catch (error) {
            last = (error as Error).message;
          }
        }),
      );
      signal.throwIfAborted();
      const exit = exitedNow();
      if (exit) return exit;
      if (pending.size === 0) break;
      if (Date.now() > deadline) {
        return {
          ok: false,
          reason: `${pending.size} of ${targets.length} replicas not ready in time: ${last}`,
        };
      }
      await sleep(pause, undefined, { signal: probing }).catch(() => signal.throwIfAborted());
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
    }
    return { ok: true };
  } finally {
    watch.close();
  }
}

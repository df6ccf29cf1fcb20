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
  const info = await target.container.inspect();
  const state = info.State;
  // Replicas roll out without a restart policy, so an exit stays an exit (with its code) instead of
  // a crash loop that looks alive; a restart count says the same of one that was restarted anyway.
  if (!state.Running || state.Restarting || info.RestartCount > 0) {
    throw new ContainerExited(`a replica exited with code ${state.ExitCode}`, target);
  }
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
 * Waits until every target is ready, or says why not by the deadline. Throws the signal's reason as soon
 * as it aborts: a worker that lost its job must not wait out the deploy timeout, nor act on the outcome.
 */
export async function waitReady(
  targets: Target[],
  check: HealthCheck | null,
  port: number | null,
  deadline: number,
  signal: AbortSignal,
  onReady: (target: Target) => void = () => undefined,
): Promise<{ ok: true } | { ok: false; reason: string; exited?: Target }> {
  const pending = new Set(targets);
  let last = 'not ready';
  while (pending.size > 0) {
    for (const target of [...pending]) {
      signal.throwIfAborted();
      try {
        const verdict = await checkOnce(target, check, port, signal);
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
        if (error instanceof ContainerExited) {
          return { ok: false, reason: error.message, exited: error.target };
        }
        last = (error as Error).message;
      }
    }
    signal.throwIfAborted();
    if (pending.size === 0) break;
    if (Date.now() > deadline) {
      return {
        ok: false,
        reason: `${pending.size} of ${targets.length} replicas not ready in time: ${last}`,
      };
    }
    await sleep(500, undefined, { signal }).catch(() => signal.throwIfAborted());
  }
  return { ok: true };
}

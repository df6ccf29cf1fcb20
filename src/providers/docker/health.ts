import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { HealthCheck } from '../../domain/ops-json.ts';

/**
 * Readiness of one container: running, and its ops.json health check passing (http: a 2xx or 3xx from
 * the path; tcp and grpc: the port accepts a connection; shell: the command exits 0 inside the
 * container). Without a health check a container that listens on a port is ready once the port
 * accepts connections; one without a port once it runs.
 */
export interface Target {
  container: Docker.Container;
  ip: string;
}

export class ContainerExited extends Error {}

async function tcpOpen(ip: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: ip, port, timeout: timeoutMs });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

async function httpOk(url: string, timeoutMs: number): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    await res.body?.cancel();
    return res.status >= 200 && res.status < 400;
  } catch {
    return false;
  }
}

async function shellOk(container: Docker.Container, command: string, timeoutMs: number): Promise<boolean> {
  const exec = await container.exec({
    Cmd: ['/bin/sh', '-c', command],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  stream.resume();
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const info = await exec.inspect();
    if (!info.Running) return info.ExitCode === 0;
    await sleep(100);
  }
  return false;
}

export async function checkOnce(
  target: Target,
  check: HealthCheck | null,
  port: number | null,
): Promise<boolean> {
  const state = (await target.container.inspect()).State;
  if (!state.Running) throw new ContainerExited(`the container exited with code ${state.ExitCode}`);
  const timeoutMs = (check?.timeout ?? 10) * 1000;
  const checkPort = check?.port ?? port;
  if (!check) return checkPort ? tcpOpen(target.ip, checkPort, timeoutMs) : true;
  switch (check.type) {
    case 'http':
      return checkPort ? httpOk(`http://${target.ip}:${checkPort}${check.path ?? '/'}`, timeoutMs) : false;
    case 'tcp':
    case 'grpc':
      return checkPort ? tcpOpen(target.ip, checkPort, timeoutMs) : false;
    case 'shell':
      return shellOk(target.container, check.command ?? 'true', timeoutMs);
  }
}

/** Waits until every target is ready, or says why not by the deadline. */
export async function waitReady(
  targets: Target[],
  check: HealthCheck | null,
  port: number | null,
  deadline: number,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const pending = new Set(targets);
  let last = 'not ready';
  while (pending.size > 0) {
    for (const target of [...pending]) {
      try {
        if (await checkOnce(target, check, port)) pending.delete(target);
        else
          last = check
            ? `the ${check.type} health check did not pass`
            : `port ${port} did not accept connections`;
      } catch (error) {
        if (error instanceof ContainerExited) return { ok: false, reason: error.message };
        last = (error as Error).message;
      }
    }
    if (pending.size === 0) break;
    if (Date.now() > deadline) {
      return {
        ok: false,
        reason: `${pending.size} of ${targets.length} replicas not ready in time: ${last}`,
      };
    }
    await sleep(500);
  }
  return { ok: true };
}

/** What every bench module shares: the berth binary, the log, the row callback, a wait and a child process. */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPostgresDatabase } from '../test/helpers/database.ts';

export const BERTH_BIN = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'bin', 'berth.js');

export const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);

/** Records one row of the report: its rounds, the target, and whether the medians meet it. */
export type AddRow = (
  measure: string,
  target: string,
  rounds: Record<string, number>[],
  met: (m: Record<string, number>) => boolean,
) => void;

/** Polls `check` every `everyMs` until it gives a value, or throws after `ms`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  ms = 120_000,
  everyMs = 10,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A child process: its output (stdout and stderr together), and a stop that waits for its exit. */
export interface Proc {
  child: ChildProcess;
  out(): string;
  stop(): Promise<void>;
}

/** Runs `node <args>` (a berth command, usually) with `env` over this process's, logging at warn. */
export function spawnNode(args: string[], env: Record<string, string>): Proc {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, BERTH_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (chunk: Buffer) => {
    out += chunk;
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  return { child, out: () => out, stop };
}

/**
 * CPU seconds (user + system) a process has used: unlike wall-clock time it hardly moves with what the
 * other users of a shared machine are doing.
 */
export function cpuSeconds(pid: number | undefined): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  // utime and stime are fields 14 and 15 of stat(5), in clock ticks (100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The admin connection the benches create their databases with. */
export const POSTGRES_ADMIN_URL =
  process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A new Postgres database named `<prefix>_<random>`: its URL, and `drop` for the caller's cleanup. */
export const postgresDatabase = (prefix: string) =>
  createPostgresDatabase(POSTGRES_ADMIN_URL, prefix, 'BENCH_POSTGRES_URL');

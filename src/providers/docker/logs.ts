import readline from 'node:readline';
import { PassThrough, Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { LogLine, LogQuery, ServiceLogs, ServiceRef } from '../provider.ts';
import { LABEL, labelFilter } from './labels.ts';

/** While following, containers started later (a new rollout, a cron run) are picked up this often. */
const RESCAN_MS = 2000;

/** What prints: replicas, job runs and cron runs (a cron template never runs). */
const PRINTING_ROLES = new Set(['replica', 'job', 'cron-run']);

/**
 * `2026-11-23T11:00:00.123456789Z` (Docker's RFC 3339 with nanoseconds, trailing zeros trimmed) as a key
 * that sorts as the time does.
 */
function timeKey(stamp: string): string {
  const [seconds, fraction = ''] = stamp.replace(/Z$/, '').split('.');
  return `${seconds}.${fraction.padEnd(9, '0')}`;
}

interface Stamped extends LogLine {
  key: string;
}

/** Reads a container's (non-TTY, multiplexed) log stream line by line, timestamps first. */
function linesOf(
  docker: Docker,
  source: NodeJS.ReadableStream,
  replica: string,
  onLine: (line: Stamped) => void,
): Promise<void> {
  const streams = { stdout: new PassThrough(), stderr: new PassThrough() };
  docker.modem.demuxStream(source, streams.stdout, streams.stderr);
  source.on('end', () => {
    streams.stdout.end();
    streams.stderr.end();
  });
  source.on('error', () => {
    streams.stdout.end();
    streams.stderr.end();
  });
  const done = (['stdout', 'stderr'] as const).map(async (stream) => {
    for await (const text of readline.createInterface({ input: streams[stream], crlfDelay: Infinity })) {
      const space = text.indexOf(' ');
      if (space < 0) continue;
      const stamp = text.slice(0, space);
      const time = new Date(`${stamp.slice(0, 23)}Z`);
      if (Number.isNaN(time.getTime())) continue;
      onLine({ key: timeKey(stamp), time: time.toISOString(), replica, stream, line: text.slice(space + 1) });
    }
  });
  return Promise.all(done).then(() => undefined);
}

/**
 * The docker driver's service logs, read from the Engine (`docker logs --timestamps`) for every
 * container of the service: the newest `tail` lines across them, in time order, then with `follow` every
 * new line as it is printed, from containers running at the call and any started afterwards.
 */
export class DockerLogs implements ServiceLogs {
  private readonly docker: Docker;
  constructor(docker: Docker) {
    this.docker = docker;
  }

  private async containers(serviceId: string) {
    const all = await this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', [LABEL.service]: serviceId }),
    });
    return all.filter((c) => PRINTING_ROLES.has(c.Labels[LABEL.role] ?? ''));
  }

  async *read(service: ServiceRef, query: LogQuery): AsyncIterable<LogLine> {
    const sinceSeconds = query.since ? Math.floor(query.since.getTime() / 1000) : 0;
    const sinceKey = query.since ? timeKey(query.since.toISOString()) : '';
    const startedAt = Math.floor(Date.now() / 1000);
    const history: Stamped[] = [];
    for (const c of await this.containers(service.id)) {
      const buffer = await this.docker
        .getContainer(c.Id)
        .logs({
          stdout: true,
          stderr: true,
          timestamps: true,
          tail: query.tail,
          since: sinceSeconds,
          follow: false,
        })
        .catch(() => Buffer.alloc(0));
      const replica = (c.Names[0] ?? c.Id).replace(/^\//, '');
      await linesOf(this.docker, Readable.from([buffer]), replica, (line) => {
        if (line.key >= sinceKey) history.push(line);
      });
    }
    history.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const shown = history.slice(-query.tail);
    for (const { key: _key, ...line } of shown) yield line;
    if (!query.follow || query.signal.aborted) return;
    // Following starts after the last line shown, so nothing repeats.
    yield* this.follow(service, query, shown.at(-1)?.key ?? sinceKey, startedAt);
  }

  /** Lines printed after `afterKey`, from every container of the service, until `signal` aborts. */
  private async *follow(
    service: ServiceRef,
    query: LogQuery,
    afterKey: string,
    sinceSeconds: number,
  ): AsyncIterable<LogLine> {
    const out = new PassThrough({ objectMode: true });
    const attached = new Map<string, NodeJS.ReadableStream>();
    const attach = async () => {
      for (const c of await this.containers(service.id).catch(() => [])) {
        if (attached.has(c.Id) || query.signal.aborted) continue;
        const stream = (await this.docker
          .getContainer(c.Id)
          .logs({ stdout: true, stderr: true, timestamps: true, since: sinceSeconds, follow: true })
          .catch(() => null)) as NodeJS.ReadableStream | null;
        if (!stream) continue;
        attached.set(c.Id, stream);
        const replica = (c.Names[0] ?? c.Id).replace(/^\//, '');
        void linesOf(this.docker, stream, replica, (line) => {
          if (line.key > afterKey && !out.writableEnded) out.write(line);
        });
      }
    };
    const rescan = setInterval(() => void attach(), RESCAN_MS);
    const stop = () => {
      clearInterval(rescan);
      for (const stream of attached.values()) (stream as Readable).destroy?.();
      out.end();
    };
    query.signal.addEventListener('abort', stop, { once: true });
    try {
      await attach();
      for await (const { key: _key, ...line } of out as AsyncIterable<Stamped>) yield line;
    } finally {
      query.signal.removeEventListener('abort', stop);
      stop();
    }
  }
}

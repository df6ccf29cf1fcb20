import readline from 'node:readline';
import { PassThrough, Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { LogLine, LogQuery, ServiceLogs, ServiceRef } from '../provider.ts';

/** While following, containers started later (a new rollout, a cron run) are picked up this often. */
const RESCAN_MS = 2000;

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

export interface LogOptions {
  stdout: true;
  stderr: true;
  timestamps: true;
  tail?: number;
  since: number;
  follow: boolean;
}

/** Something that prints for a service (a container, a swarm service): its name and its log stream. */
export interface LogSource {
  id: string;
  replica: string;
  /** `docker logs --timestamps`: a Buffer without `follow`, a stream with it. */
  logs(options: LogOptions): Promise<unknown>;
}

/**
 * Service logs read from the Engine (`docker logs --timestamps`) for every source of the service (the
 * docker driver's containers, the swarm driver's services): the newest `tail` lines across them, in time
 * order, then with `follow` every new line as it is printed, from sources there at the call and any
 * started afterwards.
 */
export class EngineLogs implements ServiceLogs {
  private readonly docker: Docker;
  private readonly sources: (serviceId: string) => Promise<LogSource[]>;
  constructor(docker: Docker, sources: (serviceId: string) => Promise<LogSource[]>) {
    this.docker = docker;
    this.sources = sources;
  }

  async *read(service: ServiceRef, query: LogQuery): AsyncIterable<LogLine> {
    const sinceSeconds = query.since ? Math.floor(query.since.getTime() / 1000) : 0;
    const sinceKey = query.since ? timeKey(query.since.toISOString()) : '';
    const startedAt = Math.floor(Date.now() / 1000);
    const history: Stamped[] = [];
    for (const c of await this.sources(service.id)) {
      const buffer = await c
        .logs({
          stdout: true,
          stderr: true,
          timestamps: true,
          tail: query.tail,
          since: sinceSeconds,
          follow: false,
        })
        .then((b) => b as Buffer)
        .catch(() => Buffer.alloc(0));
      await linesOf(this.docker, Readable.from([buffer]), c.replica, (line) => {
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
      for (const c of await this.sources(service.id).catch(() => [])) {
        if (attached.has(c.id) || query.signal.aborted) continue;
        const stream = (await c
          .logs({ stdout: true, stderr: true, timestamps: true, since: sinceSeconds, follow: true })
          .catch(() => null)) as NodeJS.ReadableStream | null;
        if (!stream) continue;
        attached.set(c.id, stream);
        void linesOf(this.docker, stream, c.replica, (line) => {
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

/**
 * What the ingress answered for each service since its metrics were last sampled: requests by status
 * class and their latencies. The process that serves the ingress counts in memory and writes its
 * counts to the driver's table (docker_ingress_traffic) every few seconds; a sample, in whichever
 * process collects (`berth serve` or a `berth worker`), takes the rows there (and this process's own
 * counts not written yet) and starts the next interval afresh.
 * @module
 */
import { sql } from 'kysely';
import type { DockerDb } from './tables.ts';

/** Latencies kept per service and interval in memory: percentiles of more requests come from a uniform sample of them. */
const RESERVOIR = 2048;
/** Latencies a written row keeps (a uniform sample of those kept): percentiles stay close, rows stay small. */
const KEPT_PER_ROW = 512;
/** How often the ingress's process writes its counts: a sample misses at most this much of the last requests. */
export const FLUSH_EVERY_MS = 5_000;
/** Rows no sample took by then (a deleted service's last requests, collection off) are dropped. */
const UNTAKEN_KEPT_MS = 3_600_000;

export interface TrafficSample {
  requests: number;
  status_2xx: number;
  status_3xx: number;
  status_4xx: number;
  status_5xx: number;
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
  latency_p99_ms: number | null;
}

export const NO_TRAFFIC: TrafficSample = {
  requests: 0,
  status_2xx: 0,
  status_3xx: 0,
  status_4xx: 0,
  status_5xx: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
  latency_p99_ms: null,
};

/** One interval's counts of one service: in memory, or as one written row. */
export interface Tally {
  /** Answers by status class: index 0 for 1xx (not reported), 1 for 2xx, ... 4 for 5xx. */
  classes: number[];
  requests: number;
  /** A uniform sample of the requests' latencies, in milliseconds (all of them when few). */
  latencies: number[];
}

/** Uniformly chosen `n` of `values` (a partial Fisher-Yates shuffle of a copy). */
function choose(values: number[], n: number): number[] {
  if (values.length <= n) return values;
  const copy = [...values];
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(Math.random() * (copy.length - i));
    [copy[i], copy[j]] = [copy[j] as number, copy[i] as number];
  }
  return copy.slice(0, n);
}

/**
 * The tallies of one service as one sample. A kept latency stands for requests / kept of its tally's
 * requests, so the percentiles weigh each tally by its requests (nearest rank; with every latency kept,
 * the plain nearest-rank percentile).
 */
export function summarize(tallies: Tally[]): TrafficSample | null {
  const requests = tallies.reduce((n, t) => n + t.requests, 0);
  if (tallies.length === 0) return null;
  const classes = [0, 1, 2, 3, 4].map((k) => tallies.reduce((n, t) => n + (t.classes[k] ?? 0), 0));
  const weighted = tallies
    .flatMap((t) => t.latencies.map((ms) => ({ ms, weight: t.requests / t.latencies.length })))
    .sort((a, b) => a.ms - b.ms);
  const total = weighted.reduce((n, w) => n + w.weight, 0);
  const percentile = (p: number) => {
    if (weighted.length === 0) return null;
    const rank = Math.ceil((p / 100) * total - 1e-9);
    let sum = 0;
    for (const w of weighted) {
      sum += w.weight;
      if (sum >= rank - 1e-9) return Math.round(w.ms * 100) / 100;
    }
    return Math.round((weighted.at(-1)?.ms ?? 0) * 100) / 100;
  };
  const [, ok = 0, redirect = 0, client = 0, server = 0] = classes;
  return {
    requests,
    status_2xx: ok,
    status_3xx: redirect,
    status_4xx: client,
    status_5xx: server,
    latency_p50_ms: percentile(50),
    latency_p95_ms: percentile(95),
    latency_p99_ms: percentile(99),
  };
}

export class Traffic {
  private readonly db: DockerDb;
  private tallies = new Map<string, Tally>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(db: DockerDb) {
    this.db = db;
  }

  /** One answer of the ingress for the service: its status and how long it took, in milliseconds. */
  record(serviceId: string, status: number, ms: number): void {
    let tally = this.tallies.get(serviceId);
    if (!tally) {
      tally = { classes: [0, 0, 0, 0, 0], requests: 0, latencies: [] };
      this.tallies.set(serviceId, tally);
    }
    tally.requests += 1;
    const kind = Math.floor(status / 100) - 1;
    if (kind >= 0 && kind < 5) tally.classes[kind] = (tally.classes[kind] ?? 0) + 1;
    // Reservoir sampling (Algorithm R): every request equally likely to be among those kept.
    if (tally.latencies.length < RESERVOIR) tally.latencies.push(ms);
    else {
      const slot = Math.floor(Math.random() * tally.requests);
      if (slot < RESERVOIR) tally.latencies[slot] = ms;
    }
  }

  /** Writes the counts every FLUSH_EVERY_MS, while this process serves the ingress. */
  start(): void {
    this.timer ??= setInterval(() => {
      void this.flush();
    }, FLUSH_EVERY_MS);
    this.timer.unref();
  }

  /** Stops the writes, writing what was counted since the last one. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /**
   * Writes the counts so far to the table, one row per service, and starts counting afresh. One write
   * at a time; a failed write keeps its counts for the next (they are merged back).
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.tallies.size === 0) return;
      const written = this.tallies;
      this.tallies = new Map();
      try {
        await this.db
          .insertInto('docker_ingress_traffic')
          .values(
            [...written].map(([serviceId, t]) => ({
              service_id: serviceId,
              requests: t.requests,
              classes: JSON.stringify(t.classes),
              latencies: JSON.stringify(choose(t.latencies, KEPT_PER_ROW)),
            })),
          )
          .execute();
      } catch {
        // The database did not answer (a restart, a lost connection): the next write carries them.
        for (const [serviceId, t] of written) this.restore(serviceId, t);
        return;
      }
      // Best effort: a failed clean-up is done by the next write.
      await this.db
        .deleteFrom('docker_ingress_traffic')
        .where('written_at', '<', new Date(Date.now() - UNTAKEN_KEPT_MS))
        .execute()
        .catch(() => undefined);
    });
    return this.flushing;
  }

  /**
   * What was answered for the service since the previous take, by any process's ingress (the rows
   * written, taken away) and this one's (not written yet); null when nothing was.
   */
  async take(serviceId: string): Promise<TrafficSample | null> {
    const own = this.tallies.get(serviceId);
    this.tallies.delete(serviceId);
    try {
      const { rows } = await sql<Tally>`
        DELETE FROM docker_ingress_traffic WHERE service_id = ${serviceId}
        RETURNING requests, classes, latencies`.execute(this.db);
      return summarize(own ? [...rows, own] : rows);
    } catch (error) {
      if (own) this.restore(serviceId, own);
      throw error;
    }
  }

  /** Puts counts back that a failed write or take had taken out. */
  private restore(serviceId: string, t: Tally): void {
    const now = this.tallies.get(serviceId);
    if (!now) {
      this.tallies.set(serviceId, t);
      return;
    }
    now.requests += t.requests;
    now.classes = now.classes.map((n, k) => n + (t.classes[k] ?? 0));
    now.latencies = choose([...now.latencies, ...t.latencies], RESERVOIR);
  }
}

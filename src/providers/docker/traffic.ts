/**
 * What the ingress answered for each service since its metrics were last sampled: requests by status
 * class and their latencies. In memory, in the process that serves the ingress; a sample takes it and
 * starts the next interval afresh.
 * @module
 */

/** Latencies kept per service and interval: percentiles of more requests come from a uniform sample of them. */
const RESERVOIR = 2048;

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

interface Tally {
  /** Answers by status class: index 0 for 1xx (not reported), 1 for 2xx, ... 4 for 5xx. */
  classes: number[];
  requests: number;
  latencies: number[];
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: number[], p: number): number {
  const value = sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
  return Math.round(value * 100) / 100;
}

export class Traffic {
  private readonly tallies = new Map<string, Tally>();

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

  /** What was answered for the service since the previous take; null when nothing was. */
  take(serviceId: string): TrafficSample | null {
    const tally = this.tallies.get(serviceId);
    if (!tally) return null;
    this.tallies.delete(serviceId);
    const sorted = tally.latencies.sort((a, b) => a - b);
    const [, ok = 0, redirect = 0, client = 0, server = 0] = tally.classes;
    return {
      requests: tally.requests,
      status_2xx: ok,
      status_3xx: redirect,
      status_4xx: client,
      status_5xx: server,
      latency_p50_ms: percentile(sorted, 50),
      latency_p95_ms: percentile(sorted, 95),
      latency_p99_ms: percentile(sorted, 99),
    };
  }
}

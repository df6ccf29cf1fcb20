import type { MetricsSubject, ServiceMetrics, ServiceSample } from '../provider.ts';
import type { SimDb } from './tables.ts';

const MB = 1024 * 1024;
const MINUTE_MS = 60_000;

/** A number in [0, 1) fixed by its inputs (FNV-1a, then a finalizer): the same minute reads the same. */
function unit(...parts: (string | number)[]): number {
  let h = 0x811c9dc5;
  for (const char of parts.join('|')) {
    h ^= char.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return (h >>> 0) / 2 ** 32;
}

/**
 * What a simulated service uses in the minute starting at `at`: a daily cycle with noise, scaled by its
 * replicas, each service with its own size and phase; only web services get requests. A pure function
 * of its inputs, so tests and benchmarks make the same series the collector stores.
 */
export function simSample(service: MetricsSubject, replicas: number, at: Date): ServiceSample {
  const minute = Math.floor(at.getTime() / MINUTE_MS);
  const phase = unit(service.id, 'phase') * 2 * Math.PI;
  const noise = unit(service.id, minute, 'noise') - 0.5;
  // Load between about 0.1 and 0.95: a day's swing, plus a little of every minute's own.
  const load = Math.min(
    1,
    Math.max(0, 0.5 + 0.35 * Math.sin((2 * Math.PI * minute) / 1440 + phase) + 0.2 * noise),
  );
  const limit = service.memory_mb_max ? service.memory_mb_max * MB : null;
  const perReplicaMemory = (limit ?? 512 * MB) * (0.3 + 0.45 * load);
  const web = service.type === 'web';
  const rate = 20 + 100 * unit(service.id, 'rate');
  const requests = web ? Math.round(replicas * rate * load) : 0;
  const status5xx = Math.round(requests * (unit(service.id, minute, '5xx') < 0.05 ? 0.08 : 0.004));
  const status4xx = Math.round(requests * 0.03);
  const status3xx = Math.round(requests * 0.05);
  const p50 = 15 + 40 * load + 10 * noise;
  return {
    cpu_cores: Number((replicas * (0.02 + 0.4 * load)).toFixed(4)),
    memory_bytes: Math.round(perReplicaMemory),
    memory_limit_bytes: limit,
    restarts: unit(service.id, minute, 'restart') < 0.002 ? 1 : 0,
    network_rx_bytes: requests * 900 + replicas * 4_000,
    network_tx_bytes: requests * 5_000 + replicas * 2_000,
    requests,
    status_2xx: requests - status5xx - status4xx - status3xx,
    status_3xx: status3xx,
    status_4xx: status4xx,
    status_5xx: status5xx,
    latency_p50_ms: requests > 0 ? Number(p50.toFixed(2)) : null,
    latency_p95_ms: requests > 0 ? Number((p50 * 3).toFixed(2)) : null,
    latency_p99_ms: requests > 0 ? Number((p50 * 6).toFixed(2)) : null,
  };
}

/** The sim driver's metrics: made up for what its world runs (its replicas), null for what runs nothing. */
export class SimMetrics implements ServiceMetrics {
  private readonly db: SimDb;
  constructor(db: SimDb) {
    this.db = db;
  }

  async sample(service: MetricsSubject): Promise<ServiceSample | null> {
    const workload = await this.db
      .selectFrom('sim_workloads')
      .select(['run_status', 'replicas'])
      .where('service_id', '=', service.id)
      .executeTakeFirst();
    if (workload?.run_status !== 'running' || workload.replicas < 1) return null;
    return simSample(service, workload.replicas, new Date());
  }
}

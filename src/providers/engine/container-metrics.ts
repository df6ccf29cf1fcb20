import type Docker from 'dockerode';
import type { MetricsSubject, ServiceSample } from '../provider.ts';

/** A container's cumulative counters when it was last sampled: the next sample reports their increase. */
interface Counters {
  cpuNs: number;
  readNs: number;
  rx: number;
  tx: number;
  restarts: number;
}

interface Reading {
  counters: Counters;
  /** Memory in use less the reclaimable page cache, as `docker stats` shows it. */
  memory: number;
}

/** The part of the Engine's stats answer read here (cgroup v1 and v2 name the page cache differently). */
interface EngineStats {
  cpu_stats?: { cpu_usage?: { total_usage?: number } };
  memory_stats?: { usage?: number; stats?: Record<string, number> };
  networks?: Record<string, { rx_bytes: number; tx_bytes: number }>;
}

/** A running replica's container, and the Engine it runs on. */
export interface Replica {
  id: string;
  engine: Docker;
}

/** What a service's replicas used over the interval; each null when no replica could be read. */
export type Usage = Pick<
  ServiceSample,
  'cpu_cores' | 'memory_bytes' | 'restarts' | 'network_rx_bytes' | 'network_tx_bytes'
>;

/** An increase of a counter that may have started again (a restarted container's network counters). */
const increase = (now: number, before: number) => (now >= before ? now - before : now);

/**
 * Replicas' use from the Engines they run on: each one's stats (one-shot, so no second of waiting per
 * container) and its restart count, as the increase of each counter since this process last read it.
 * CPU is the sum over replicas, memory the largest replica's (a limit is per replica).
 */
export class ContainerUsage {
  /** Per service, its containers' counters as of the last read (containers gone are dropped with it). */
  private readonly last = new Map<string, Map<string, Counters>>();

  async read(serviceId: string, replicas: Replica[]): Promise<Usage> {
    const readings = await Promise.all(replicas.map((r) => this.readOne(r)));
    const before = this.last.get(serviceId) ?? new Map<string, Counters>();
    const now = new Map<string, Counters>();
    let cpu: number | null = null;
    let memory: number | null = null;
    let restarts: number | null = null;
    let rx: number | null = null;
    let tx: number | null = null;
    readings.forEach((reading, i) => {
      const id = replicas[i]?.id;
      if (!reading || !id) return;
      const { counters } = reading;
      now.set(id, counters);
      memory = Math.max(memory ?? 0, reading.memory);
      restarts ??= 0;
      rx ??= 0;
      tx ??= 0;
      const prior = before.get(id);
      if (!prior) return;
      const wall = counters.readNs - prior.readNs;
      if (wall > 0) cpu = (cpu ?? 0) + increase(counters.cpuNs, prior.cpuNs) / wall;
      restarts += increase(counters.restarts, prior.restarts);
      rx += increase(counters.rx, prior.rx);
      tx += increase(counters.tx, prior.tx);
    });
    if (now.size > 0) this.last.set(serviceId, now);
    else this.last.delete(serviceId);
    return {
      cpu_cores: cpu === null ? null : Math.round((cpu as number) * 10_000) / 10_000,
      memory_bytes: memory,
      restarts,
      network_rx_bytes: rx,
      network_tx_bytes: tx,
    };
  }

  /** One container's counters and memory; null when it went away meanwhile (or its Engine is out of reach). */
  private async readOne({ id, engine }: Replica): Promise<Reading | null> {
    const container = engine.getContainer(id);
    try {
      const [stats, info] = await Promise.all([
        container.stats({ stream: false, 'one-shot': true } as { stream: false }) as Promise<EngineStats>,
        container.inspect(),
      ]);
      const memoryStats = stats.memory_stats ?? {};
      const cache = memoryStats.stats?.inactive_file ?? memoryStats.stats?.total_inactive_file ?? 0;
      const networks = Object.values(stats.networks ?? {});
      return {
        memory: Math.max(0, (memoryStats.usage ?? 0) - cache),
        counters: {
          cpuNs: stats.cpu_stats?.cpu_usage?.total_usage ?? 0,
          readNs: Date.now() * 1e6,
          rx: networks.reduce((sum, n) => sum + n.rx_bytes, 0),
          tx: networks.reduce((sum, n) => sum + n.tx_bytes, 0),
          restarts: info.RestartCount,
        },
      };
    } catch {
      return null;
    }
  }
}

/** The memory limit a service runs under, in bytes. */
export const memoryLimitOf = (service: MetricsSubject) =>
  service.memory_mb_max ? service.memory_mb_max * 1024 * 1024 : null;

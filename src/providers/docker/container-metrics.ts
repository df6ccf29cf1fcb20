import type Docker from 'dockerode';
import type { MetricsSubject, ServiceMetrics, ServiceSample } from '../provider.ts';
import { LABEL, labelFilter } from './labels.ts';
import { NO_TRAFFIC, type Traffic } from './traffic.ts';

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

/** An increase of a counter that may have started again (a restarted container's network counters). */
const increase = (now: number, before: number) => (now >= before ? now - before : now);

/**
 * The docker driver's service metrics: each running replica's stats from the Engine (one-shot, so
 * no second of waiting per container) and its restart count, the increase of each counter since this
 * process last sampled it, and the ingress's requests (traffic.ts).
 */
export class ContainerMetrics implements ServiceMetrics {
  private readonly docker: Docker;
  private readonly traffic: Traffic;
  /** Per service, its containers' counters as of the last sample (containers gone are dropped with it). */
  private readonly last = new Map<string, Map<string, Counters>>();

  constructor(docker: Docker, traffic: Traffic) {
    this.docker = docker;
    this.traffic = traffic;
  }

  async sample(service: MetricsSubject): Promise<ServiceSample | null> {
    const replicas = await this.docker.listContainers({
      filters: labelFilter({ [LABEL.service]: service.id, [LABEL.role]: 'replica' }),
    });
    const traffic = this.traffic.take(service.id);
    if (replicas.length === 0 && !traffic) {
      this.last.delete(service.id);
      return null;
    }
    const readings = await Promise.all(replicas.map((c) => this.read(c.Id)));
    const before = this.last.get(service.id) ?? new Map<string, Counters>();
    const now = new Map<string, Counters>();
    let cpu: number | null = null;
    let memory: number | null = null;
    let restarts = 0;
    let rx = 0;
    let tx = 0;
    readings.forEach((reading, i) => {
      const id = replicas[i]?.Id;
      if (!reading || !id) return;
      const { counters } = reading;
      now.set(id, counters);
      memory = Math.max(memory ?? 0, reading.memory);
      const prior = before.get(id);
      if (!prior) return;
      const wall = counters.readNs - prior.readNs;
      if (wall > 0) cpu = (cpu ?? 0) + increase(counters.cpuNs, prior.cpuNs) / wall;
      restarts += increase(counters.restarts, prior.restarts);
      rx += increase(counters.rx, prior.rx);
      tx += increase(counters.tx, prior.tx);
    });
    this.last.set(service.id, now);
    return {
      cpu_cores: cpu === null ? null : Math.round((cpu as number) * 10_000) / 10_000,
      memory_bytes: memory,
      memory_limit_bytes: service.memory_mb_max ? service.memory_mb_max * 1024 * 1024 : null,
      restarts,
      network_rx_bytes: rx,
      network_tx_bytes: tx,
      ...(traffic ?? NO_TRAFFIC),
    };
  }

  /** One container's counters and memory; null when it went away meanwhile. */
  private async read(id: string): Promise<Reading | null> {
    const container = this.docker.getContainer(id);
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

import type Docker from 'dockerode';
import { ContainerUsage, memoryLimitOf } from '../engine/container-metrics.ts';
import { replicaFilter } from '../engine/labels.ts';
import { NO_TRAFFIC, type Traffic } from '../engine/traffic.ts';
import type { MetricsSubject, ServiceMetrics, ServiceSample } from '../provider.ts';

/**
 * The docker driver's service metrics: its running replicas' use (ContainerUsage, on this host's Engine)
 * and the ingress's requests (engine/traffic.ts).
 */
export class ContainerMetrics implements ServiceMetrics {
  private readonly docker: Docker;
  private readonly traffic: Traffic;
  private readonly usage = new ContainerUsage();

  constructor(docker: Docker, traffic: Traffic) {
    this.docker = docker;
    this.traffic = traffic;
  }

  async sample(service: MetricsSubject): Promise<ServiceSample | null> {
    const replicas = await this.docker.listContainers({
      filters: replicaFilter(service.id),
    });
    const traffic = await this.traffic.take(service.id);
    const usage = await this.usage.read(
      service.id,
      replicas.map((c) => ({ id: c.Id, engine: this.docker })),
    );
    if (replicas.length === 0 && !traffic) return null;
    return {
      ...usage,
      memory_limit_bytes: memoryLimitOf(service),
      ...(traffic ?? NO_TRAFFIC),
    };
  }
}

import Docker from 'dockerode';
import { ContainerUsage, memoryLimitOf, type Replica } from '../engine/container-metrics.ts';
import { NO_TRAFFIC, type Traffic } from '../engine/traffic.ts';
import type { MetricsSubject, ServiceMetrics, ServiceSample } from '../provider.ts';
import { running, servingName, type Task, tasksOf } from './services.ts';

/** Task states of a replica that ended by itself (it crashed, or exited), not replaced by an update. */
const ENDED = new Set(['failed', 'complete']);

/**
 * The swarm driver's service metrics. Restarts from the task history on the manager: the swarm
 * replaces a replica that ended with a new task, so each task that ended by itself since the previous
 * sample is a restart. CPU, memory and network from the Engine of each node a running task is on
 * (BERTH_SWARM_NODE_ENGINES; the manager's API has no stats), as the docker driver reads them
 * (ContainerUsage). Requests from the ingress (engine/traffic.ts).
 */
export class SwarmMetrics implements ServiceMetrics {
  private readonly manager: Docker;
  private readonly traffic: Traffic;
  /** The nodes' Engines, by hostname or node ID as the setting names them. */
  private readonly engines: Map<string, Docker>;
  private readonly usage = new ContainerUsage();
  /** Per service, the IDs of the ended tasks the previous sample saw. */
  private readonly ended = new Map<string, Set<string>>();

  constructor(manager: Docker, traffic: Traffic, nodeEngines: Map<string, Docker.DockerOptions>) {
    this.manager = manager;
    this.traffic = traffic;
    this.engines = new Map([...nodeEngines].map(([node, options]) => [node, new Docker(options)]));
  }

  async sample(service: MetricsSubject): Promise<ServiceSample | null> {
    const traffic = await this.traffic.take(service.id);
    const tasks = await tasksOf(this.manager, servingName(service.id)).catch(() => [] as Task[]);
    const live = running(tasks);
    const usage = await this.usage.read(service.id, await this.replicas(live));
    const restarts = this.restarts(service.id, tasks);
    if (live.length === 0 && !traffic) return null;
    return {
      ...usage,
      restarts: restarts + (usage.restarts ?? 0),
      memory_limit_bytes: memoryLimitOf(service),
      ...(traffic ?? NO_TRAFFIC),
    };
  }

  /** The running tasks' containers on the nodes whose Engine is known. */
  private async replicas(tasks: Task[]): Promise<Replica[]> {
    if (this.engines.size === 0 || tasks.length === 0) return [];
    const hostnames = new Map(
      (await this.manager.listNodes()).map((n: { ID: string; Description?: { Hostname?: string } }) => [
        n.ID,
        n.Description?.Hostname,
      ]),
    );
    return tasks.flatMap((task) => {
      const id = task.Status.ContainerStatus?.ContainerID;
      const node = task.NodeID;
      if (!id || !node) return [];
      const hostname = hostnames.get(node);
      const engine = this.engines.get(node) ?? (hostname ? this.engines.get(hostname) : undefined);
      return engine ? [{ id, engine }] : [];
    });
  }

  /** Tasks that ended by themselves since the previous sample (0 on the first). */
  private restarts(serviceId: string, tasks: Task[]): number {
    const ended = new Set(tasks.filter((t) => ENDED.has(t.Status.State)).map((t) => t.ID));
    const before = this.ended.get(serviceId);
    // The manager keeps a few ended tasks per slot: the set follows what it still lists (a service with
    // no task left is forgotten).
    if (tasks.length > 0) this.ended.set(serviceId, ended);
    else this.ended.delete(serviceId);
    if (!before) return 0;
    return [...ended].filter((id) => !before.has(id)).length;
  }
}

/**
 * What the swarm driver asks the Engine for: the swarm service spec of a Berth service (its replicas,
 * resources, network aliases, placement, health check and rolling-update policy), and what it reads back
 * of tasks.
 * @module
 */
import type Docker from 'dockerode';
import type { HealthCheck, OpsConfig } from '../../domain/ops-json.ts';
import { LABEL, labelsOf, type Role } from '../engine/labels.ts';
import type { DesiredService } from '../provider.ts';
import type { Launch } from './secrets.ts';

/** The placement label a node carries to run the services of a node group (`prov_node_group_id`). */
export const NODE_GROUP_LABEL = 'berth.node_group';

/** The Engine counts time in nanoseconds. */
const SECOND = 1e9;

/** The swarm service that serves a web, internal or worker service: updated in place by each rollout. */
export function servingName(serviceId: string): string {
  return `berth-${serviceId}`;
}

/** A job deployment's replicated-job service. */
export function jobName(deploymentId: string): string {
  return `berth-job-${deploymentId}`;
}

/** A cron deployment's template: a service of no replicas holding the spec each tick runs. */
export function cronTemplateName(deploymentId: string): string {
  return `berth-cron-${deploymentId}`;
}

export function overlayName(environmentId: string): string {
  return `berth-env-${environmentId}`;
}

/**
 * The ops.json health check as the container's own (the swarm waits for it before a task counts as
 * running, and a rolling update before it moves on). It runs inside the container, so the image needs
 * busybox-style `wget` (http) or `nc` (tcp, grpc). Without a check, a service with a port is healthy once
 * the port accepts connections; one without a port once it runs.
 */
export function healthCheckOf(
  check: HealthCheck | null,
  port: number | null,
  prelude = '',
): Docker.HealthConfig | undefined {
  const probePort = check?.port ?? port;
  const tcp = (p: number) => `nc -w ${check?.timeout ?? 10} 127.0.0.1 ${p} </dev/null`;
  let command: string | null = null;
  if (!check) command = probePort ? tcp(probePort) : null;
  // A shell check is the user's own command: it sees the variables, as on the docker provider.
  else if (check.type === 'shell') command = `${prelude}${check.command ?? 'true'}`;
  else if (!probePort) command = 'false';
  else if (check.type === 'http')
    command = `wget -qO /dev/null http://127.0.0.1:${probePort}${check.path ?? '/'}`;
  else command = tcp(probePort);
  if (command === null) return undefined;
  return {
    Test: ['CMD-SHELL', command],
    Interval: SECOND,
    Timeout: (check?.timeout ?? 10) * SECOND,
    Retries: 3,
    StartPeriod: 0,
  };
}

/**
 * The task template every kind of service shares: image, command and variables (`launch`, secrets.ts),
 * resources, network, placement.
 */
export function taskTemplate(
  desired: DesiredService,
  image: string,
  ops: OpsConfig,
  role: Role,
  network: string,
  svcAlias: string,
  launch: Launch,
): Docker.ContainerTaskSpec {
  const { service } = desired;
  const serving = role === 'replica';
  const { healthPrelude, ...start } = launch;
  return {
    ContainerSpec: {
      Image: image,
      ...start,
      Labels: labelsOf(desired, role),
      HealthCheck: serving ? healthCheckOf(ops.health_check, service.port, healthPrelude) : undefined,
      StopGracePeriod: 10 * SECOND,
    },
    Resources: {
      Reservations: {
        NanoCPUs: service.cpu_count_min ? Math.round(service.cpu_count_min * SECOND) : undefined,
        MemoryBytes: service.memory_mb_min ? service.memory_mb_min * 1024 * 1024 : undefined,
      },
      Limits: {
        NanoCPUs: service.cpu_count_max ? Math.round(service.cpu_count_max * SECOND) : undefined,
        MemoryBytes: service.memory_mb_max ? service.memory_mb_max * 1024 * 1024 : undefined,
      },
    },
    // A serving replica that exits is replaced; a job's run is not retried (its exit code is the outcome).
    RestartPolicy: serving ? { Condition: 'any', Delay: SECOND } : { Condition: 'none' },
    Placement: {
      Constraints: service.prov_node_group_id
        ? [`node.labels.${NODE_GROUP_LABEL}==${service.prov_node_group_id}`]
        : [],
    },
    Networks: [{ Target: network, Aliases: [service.subdomain, svcAlias] }],
  };
}

/**
 * A web, internal or worker service: `replica_count` replicas, tasks resolved by DNS (the environment
 * network's aliases: the swarm's virtual IPs need IPVS, which not every kernel has), a web port published
 * on the node that runs each task (the ingress reaches it there), and swarm's rolling update: one replica
 * at a time, the new one started (and healthy) before the old one stops, each watched for `monitor`
 * seconds, and the whole update rolled back by the swarm at the first failure.
 */
export function servingSpec(
  desired: DesiredService,
  template: Docker.ContainerTaskSpec,
  monitorSeconds: number,
): Docker.ServiceSpec {
  const { service } = desired;
  const update = {
    Parallelism: 1,
    Order: 'start-first',
    Monitor: monitorSeconds * SECOND,
    MaxFailureRatio: 0,
  };
  return {
    Name: servingName(service.id),
    Labels: labelsOf(desired, 'replica'),
    TaskTemplate: template,
    Mode: { Replicated: { Replicas: service.replica_count ?? 1 } },
    UpdateConfig: { ...update, FailureAction: 'rollback' },
    RollbackConfig: { ...update, Parallelism: 0, FailureAction: 'pause' },
    EndpointSpec: {
      Mode: 'dnsrr',
      Ports:
        service.type === 'web' && service.port
          ? [{ Protocol: 'tcp', TargetPort: service.port, PublishMode: 'host' }]
          : [],
    },
  };
}

/** What the driver reads of a task (the Engine API's Task object). */
export interface Task {
  ID: string;
  NodeID?: string;
  Slot?: number;
  DesiredState: string;
  Spec: { ContainerSpec?: { Labels?: Record<string, string> } };
  Status: {
    State: string;
    Message?: string;
    Err?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
    PortStatus?: { Ports?: Array<{ TargetPort?: number; PublishedPort?: number }> };
  };
}

export async function tasksOf(
  docker: Docker,
  serviceName: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<Task[]> {
  return (await docker.listTasks({ filters: { service: [serviceName] }, ...options })) as Task[];
}

/** A task as an error shows it: enough to tell from a log why it is where it is. */
export function describeTask(task: Task): string {
  const { State, Message, Err } = task.Status;
  const said = [Message && `"${Message}"`, Err && `error "${Err}"`].filter(Boolean).join(', ');
  return `${task.ID} (desired ${task.DesiredState}, ${State}${said ? `: ${said}` : ''}, node ${task.NodeID || 'none'})`;
}

/** Tasks that run and (with a health check) are healthy: the swarm calls a task running only then. */
export function running(tasks: Task[]): Task[] {
  return tasks.filter((t) => t.DesiredState === 'running' && t.Status.State === 'running');
}

export function ofDeployment(tasks: Task[], deploymentId: string): Task[] {
  return tasks.filter((t) => t.Spec.ContainerSpec?.Labels?.[LABEL.deployment] === deploymentId);
}

const FAILED_STATES = new Set(['failed', 'rejected']);
/** Task states a task never leaves. */
const ENDED_STATES = new Set(['complete', 'failed', 'rejected', 'shutdown', 'orphaned', 'remove']);

/**
 * Whether a job service (a cron run, an ops.json cron request) has ended: it has a task and every task
 * has ended. One just created has no task yet (the orchestrator makes it a moment later), and the
 * desired state says nothing: a job's tasks are all desired `complete` from the start.
 */
export function jobEnded(tasks: Task[]): boolean {
  return tasks.length > 0 && tasks.every((t) => ENDED_STATES.has(t.Status.State));
}

export function failedTasks(tasks: Task[]): Task[] {
  return tasks.filter((t) => FAILED_STATES.has(t.Status.State));
}

/** The distinct errors of failed tasks, as one line. */
export function taskErrors(tasks: Task[]): string {
  const errors = new Set(failedTasks(tasks).map((t) => t.Status.Err || t.Status.Message || t.Status.State));
  return [...errors].join('; ');
}

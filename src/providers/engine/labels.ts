import type { DesiredService } from '../provider.ts';

/**
 * Labels on everything the docker provider creates. They are how state is rebuilt from Docker after a
 * restart: which account, environment, service and deployment a container or image belongs to, and
 * what it is for.
 */
export const LABEL = {
  managed: 'berth.managed',
  account: 'berth.account',
  environment: 'berth.environment',
  service: 'berth.service',
  deployment: 'berth.deployment',
  // The deployment's generation: a rollout retires only containers of older generations.
  generation: 'berth.generation',
  role: 'berth.role',
  cronSchedule: 'berth.cron-schedule',
  // A swarm task that makes an ops.json cron job's request: which job (a hash of its schedule and path).
  cronJob: 'berth.cron-job',
  // An ops.json dependency's container and volume carry these instead of `service`, so nothing that
  // retires or removes a service's containers by their service touches them: only resources.ts does.
  dependencyOf: 'berth.dependency-of',
  dependency: 'berth.dependency',
  engine: 'berth.engine',
  // A dependency backup's or restore's helper container: the dependency's container name.
  backupOf: 'berth.backup-of',
  // A swarm service scaled to no replicas for a dependency restore: the replicas it had, given back after.
  restoreReplicas: 'berth.restore-replicas',
  // ... and which restore attempt holds it so: only that one scales it back.
  restoreHolder: 'berth.restore-holder',
} as const;

/**
 * replica: serves traffic or works; job: one run per deployment; cron-template / cron-run: schedules;
 * cron-request: an ops.json cron job's request (swarm); backup: a dependency backup's or restore's helper;
 * sandbox: a replica's network namespace, made ahead (docker/sandboxes.ts).
 */
export type Role = 'replica' | 'job' | 'cron-template' | 'cron-run' | 'cron-request' | 'backup' | 'sandbox';

/** What everything a deployment makes carries. */
export function labelsOf(desired: DesiredService, role: Role): Record<string, string> {
  const { service, environment, deploymentId, generation } = desired;
  return {
    [LABEL.managed]: 'true',
    [LABEL.account]: service.account_id,
    [LABEL.environment]: environment.id,
    [LABEL.service]: service.id,
    [LABEL.deployment]: deploymentId,
    [LABEL.generation]: String(generation),
    [LABEL.role]: role,
  };
}

export function networkName(environmentId: string): string {
  return `berth-env-${environmentId}`;
}

export function labelFilter(labels: Record<string, string>): { label: string[] } {
  return { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
}

/** The filter for a service's replicas (containers on docker, swarm services on swarm), of any deployment. */
export function replicaFilter(serviceId: string): { label: string[] } {
  return labelFilter({ [LABEL.service]: serviceId, [LABEL.role]: 'replica' });
}

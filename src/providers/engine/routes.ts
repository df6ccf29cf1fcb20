import type { OpsConfig } from '../../domain/ops-json.ts';
import { SupersededError, TerminalError } from '../../jobs/errors.ts';
import { type Applied, type DesiredService, type Observed, REMOVED_GENERATION } from '../provider.ts';
import type { DockerDb } from './tables.ts';

/**
 * The routing table (`docker_routes`) of the drivers that run on the Docker Engine API (docker, swarm):
 * which deployment serves a service, at which generation, under which host names, with which ops.json.
 * The ingress and the cron schedulers read only this.
 */

/** What the routing table holds for a service: the deployment in place and its generation. */
export async function routeOf(db: DockerDb, serviceId: string) {
  return db
    .selectFrom('docker_routes')
    .select(['deployment_id', 'generation'])
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
}

/** What a removed service reports. */
export const DELETED: Observed = { run_status: 'deleted', ready_count: 0, generation: null };

/** What observe starts from: the route in place and its generation; `deleted` once the tombstone is there. */
export async function observedRoute(db: DockerDb, serviceId: string) {
  const route = await routeOf(db, serviceId);
  const deleted = route !== undefined && Number(route.generation) === REMOVED_GENERATION;
  return { route, deleted, generation: route && !deleted ? Number(route.generation) : null };
}

/**
 * Moves traffic to a deployment: from here on the ingress sends the service's requests (its subdomain
 * and its domains) to it. Fenced: the row changes only if the generation in place is not newer.
 * Returns whether it moved.
 */
export async function promote(db: DockerDb, desired: DesiredService, ops: OpsConfig): Promise<boolean> {
  const { service, deploymentId, generation } = desired;
  const row = {
    deployment_id: deploymentId,
    generation,
    port: service.type === 'job' || service.type === 'cron' ? null : service.port,
    ops: JSON.stringify(ops),
    subdomain: service.subdomain,
    environment_id: service.environment_id,
    type: service.type,
    domains: JSON.stringify(desired.domains.map((d) => d.toLowerCase())),
    updated_at: new Date(),
  };
  const moved = await db
    .insertInto('docker_routes')
    .values({ service_id: service.id, ...row })
    .onConflict((oc) =>
      oc
        .column('service_id')
        .doUpdateSet(row)
        .whereRef('docker_routes.generation', '<=', 'excluded.generation'),
    )
    .returning('service_id')
    .executeTakeFirst();
  return moved !== undefined;
}

/** The tombstone of a removed service: from here no apply of any generation routes or promotes it again. */
export async function bury(db: DockerDb, serviceId: string): Promise<void> {
  const tombstone = {
    deployment_id: serviceId,
    generation: REMOVED_GENERATION,
    port: null,
    ops: JSON.stringify({}),
    subdomain: null,
    environment_id: null,
    type: null,
    domains: '[]',
    updated_at: new Date(),
  };
  await db
    .insertInto('docker_routes')
    .values({ service_id: serviceId, ...tombstone })
    .onConflict((oc) => oc.column('service_id').doUpdateSet(tombstone))
    .execute();
}

const namespaceOf = (environmentId: string) => `env-${environmentId.slice(0, 8)}`;

/** A service's internal address (`kube_svc_alias`): a network alias of its replicas in its environment. */
export function serviceAlias(environmentId: string, subdomain: string): string {
  return `${subdomain}.${namespaceOf(environmentId)}.svc.cluster.local`;
}

/**
 * How every rollout of an Engine-API driver begins: what it reports as applied, the refusal of Helm
 * charts, and the fence (an older generation than the one in place is superseded). Returns the route in
 * place, if any.
 */
export async function admit(db: DockerDb, desired: DesiredService, driver: 'docker' | 'swarm') {
  const { service, deploymentId, environment, generation } = desired;
  const applied: Applied = {
    provDeploymentId: `${driver}-${deploymentId.slice(0, 8)}`,
    namespaceName: namespaceOf(environment.id),
    svcAlias: serviceAlias(environment.id, service.subdomain),
  };
  if (service.source === 'helm_chart') {
    throw new TerminalError(
      `the ${driver} provider cannot run Helm charts: use the kubernetes provider for helm_chart services`,
    );
  }
  const route = await routeOf(db, service.id);
  if (route && Number(route.generation) > generation) {
    throw new SupersededError(`generation ${route.generation} is in place; ${generation} is older`);
  }
  return { applied, route };
}

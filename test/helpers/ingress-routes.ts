import { randomUUID } from 'node:crypto';
import { DEFAULT_OPS_CONFIG } from '../../src/domain/ops-json.ts';
import type { DockerDb } from '../../src/providers/engine/tables.ts';

/**
 * A web service's route as the ingress reads it (a `docker_routes` row, port 80, generation 1) at
 * `subdomain`, with the default ops.json's fields replaced by `ops` (an older stored shape too): for the
 * ingress's own tests, which give the replicas' addresses themselves. Returns the service id.
 */
export async function insertRoute(
  db: DockerDb,
  subdomain: string,
  ops: object = {},
  serviceId: string = randomUUID(),
): Promise<string> {
  await db
    .insertInto('docker_routes')
    .values({
      service_id: serviceId,
      deployment_id: randomUUID(),
      port: 80,
      ops: JSON.stringify({ ...DEFAULT_OPS_CONFIG, ...ops }),
      generation: 1,
      subdomain,
      environment_id: randomUUID(),
      type: 'web',
      domains: '[]',
    })
    .execute();
  return serviceId;
}

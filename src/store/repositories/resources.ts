import { sql } from 'kysely';
import type { Db } from '../database.ts';
import type { ResourceState, ServiceResourceRow } from '../schema.ts';

/** Names one dependency of a service: (kind, type, id) is unique per service. */
export interface ResourceRef {
  kind: string;
  type: string;
  resource_id: string;
}

const keyed = (serviceId: string, ref: ResourceRef) => ({
  service_id: serviceId,
  kind: ref.kind,
  type: ref.type,
  resource_id: ref.resource_id,
});

/** A service's dependencies, in the order they were first made. */
export function listResources(db: Db, serviceId: string): Promise<ServiceResourceRow[]> {
  return db
    .selectFrom('service_resources')
    .selectAll()
    .where('service_id', '=', serviceId)
    .orderBy('provisioned_at', (ob) => ob.asc().nullsLast())
    .orderBy('kind')
    .orderBy('type')
    .orderBy('resource_id')
    .execute();
}

/** Records that a resource is being made (or updated) from `spec`. */
export async function beginResource(
  db: Db,
  serviceId: string,
  ref: ResourceRef & { prefix: string; spec: unknown },
): Promise<void> {
  const row = {
    prefix: ref.prefix,
    spec: JSON.stringify(ref.spec),
    state: 'provisioning' as const,
    error: '',
  };
  await db
    .insertInto('service_resources')
    .values({ ...keyed(serviceId, ref), ...row })
    .onConflict((oc) =>
      oc.columns(['service_id', 'kind', 'type', 'resource_id']).doUpdateSet({
        ...row,
        updated_at: sql`clock_timestamp()`,
      }),
    )
    .execute();
}

/** Records what the provider made; the first time also when. */
export async function resourceMade(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  made: { attributes: Record<string, string>; sealedPassword: string | null },
): Promise<void> {
  await db
    .updateTable('service_resources')
    .set({
      state: 'available',
      attributes: JSON.stringify(made.attributes),
      password: made.sealedPassword,
      error: '',
      provisioned_at: sql`coalesce(provisioned_at, clock_timestamp())`,
      updated_at: sql`clock_timestamp()`,
    })
    .where('service_id', '=', serviceId)
    .where('kind', '=', ref.kind)
    .where('type', '=', ref.type)
    .where('resource_id', '=', ref.resource_id)
    .execute();
}

export async function markResource(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  change: { state?: ResourceState; error?: string },
): Promise<void> {
  await db
    .updateTable('service_resources')
    .set({ ...change, updated_at: sql`clock_timestamp()` })
    .where('service_id', '=', serviceId)
    .where('kind', '=', ref.kind)
    .where('type', '=', ref.type)
    .where('resource_id', '=', ref.resource_id)
    .execute();
}

export async function forgetResource(db: Db, serviceId: string, ref: ResourceRef): Promise<void> {
  await db
    .deleteFrom('service_resources')
    .where('service_id', '=', serviceId)
    .where('kind', '=', ref.kind)
    .where('type', '=', ref.type)
    .where('resource_id', '=', ref.resource_id)
    .execute();
}

/** The sealed password of the dependency whose `$passwordArn` is `arn`, if one has it, and whose it is. */
export async function sealedPasswordByArn(db: Db, arn: string) {
  return db
    .selectFrom('service_resources')
    .innerJoin('services', 'services.id', 'service_resources.service_id')
    .select([
      'service_resources.password as sealed',
      'services.id as service_id',
      'services.account_id',
      'services.environment_id',
    ])
    .where(sql<string>`service_resources.attributes->>'passwordArn'`, '=', arn)
    .where('service_resources.password', 'is not', null)
    .$narrowType<{ sealed: string }>()
    .executeTakeFirst();
}

import { sql, type UpdateObject } from 'kysely';
import type { Db } from '../database.ts';
import { changedSince, eventState, inTransaction, recordEvents } from '../events.ts';
import type { Database, ResourceState, ServiceResourceRow } from '../schema.ts';

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

/**
 * Records that a resource is being made (or updated) from `spec`, with the password offered to the
 * provider (sealed); once made, the row holds the password the provider reports, if any.
 */
export async function beginResource(
  db: Db,
  serviceId: string,
  ref: ResourceRef & { prefix: string; spec: unknown; sealedPassword: string },
): Promise<void> {
  const row = {
    prefix: ref.prefix,
    spec: JSON.stringify(ref.spec),
    state: 'provisioning' as const,
    error: '',
    password: ref.sealedPassword,
  };
  await inTransaction(db, async (trx) => {
    const written = await trx
      .insertInto('service_resources')
      .values({ ...keyed(serviceId, ref), ...row })
      .onConflict((oc) =>
        oc.columns(['service_id', 'kind', 'type', 'resource_id']).doUpdateSet({
          ...row,
          updated_at: sql`clock_timestamp()`,
        }),
      )
      .returningAll()
      .returning((eb) => [
        sql<boolean>`xmax = 0`.as('inserted'),
        // The statement's snapshot: the row as it was before this write (none when inserted).
        eb
          .selectFrom('service_resources as before')
          .select(
            sql<boolean>`${eventState('dependency', 'before')} IS DISTINCT FROM ${eventState('dependency', 'service_resources')}`.as(
              'changed',
            ),
          )
          .where('before.service_id', '=', serviceId)
          .where('before.kind', '=', ref.kind)
          .where('before.type', '=', ref.type)
          .where('before.resource_id', '=', ref.resource_id)
          .as('changed'),
      ])
      .executeTakeFirstOrThrow();
    if (written.inserted) await recordEvents(trx, 'dependency', 'created', [written]);
    else if (written.changed !== false) await recordEvents(trx, 'dependency', 'updated', [written]);
  });
}

/** Updates one dependency with `set`, recording an event when its event state changed. */
async function updateResource(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  set: UpdateObject<Database, 'service_resources'>,
): Promise<void> {
  await inTransaction(db, async (trx) => {
    const rows = await trx
      .updateTable('service_resources')
      .from(
        trx
          .selectFrom('service_resources')
          .select([
            'service_id as before_service_id',
            'kind as before_kind',
            'type as before_type',
            'resource_id as before_resource_id',
            eventState('dependency', 'service_resources').as('before_state'),
          ])
          .where('service_id', '=', serviceId)
          .where('kind', '=', ref.kind)
          .where('type', '=', ref.type)
          .where('resource_id', '=', ref.resource_id)
          .forNoKeyUpdate()
          .as('before'),
      )
      .set(set)
      .whereRef('service_resources.service_id', '=', 'before.before_service_id')
      .whereRef('service_resources.kind', '=', 'before.before_kind')
      .whereRef('service_resources.type', '=', 'before.before_type')
      .whereRef('service_resources.resource_id', '=', 'before.before_resource_id')
      .returningAll('service_resources')
      .returning(changedSince('dependency', 'service_resources').as('changed'))
      .execute();
    await recordEvents(
      trx,
      'dependency',
      'updated',
      rows.filter((r) => r.changed),
    );
  });
}

/** Records what the provider made; the first time also when. */
export async function resourceMade(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  made: { attributes: Record<string, string>; sealedPassword: string | null },
): Promise<void> {
  await updateResource(db, serviceId, ref, {
    state: 'available',
    attributes: JSON.stringify(made.attributes),
    password: made.sealedPassword,
    error: '',
    provisioned_at: sql<Date>`coalesce(service_resources.provisioned_at, clock_timestamp())`,
    updated_at: sql<Date>`clock_timestamp()`,
  });
}

export async function markResource(
  db: Db,
  serviceId: string,
  ref: ResourceRef,
  change: { state?: ResourceState; error?: string },
): Promise<void> {
  await updateResource(db, serviceId, ref, { ...change, updated_at: sql<Date>`clock_timestamp()` });
}

export async function forgetResource(db: Db, serviceId: string, ref: ResourceRef): Promise<void> {
  await inTransaction(db, async (trx) => {
    const gone = await trx
      .deleteFrom('service_resources')
      .where('service_id', '=', serviceId)
      .where('kind', '=', ref.kind)
      .where('type', '=', ref.type)
      .where('resource_id', '=', ref.resource_id)
      .returningAll()
      .execute();
    await recordEvents(trx, 'dependency', 'deleted', gone);
  });
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

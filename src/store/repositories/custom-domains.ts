import type { Insertable, Updateable } from 'kysely';
import { CUSTOM_DOMAIN_STATES, type CustomDomainState } from '../../domain/custom-domain-states.ts';
import type { Db } from '../database.ts';
import { changedSince, eventState, inTransaction, recordEvents } from '../events.ts';
import type { CustomDomainRow, CustomDomainsTable } from '../schema.ts';

export async function insertCustomDomain(
  db: Db,
  row: Insertable<CustomDomainsTable>,
): Promise<CustomDomainRow> {
  return inTransaction(db, async (trx) => {
    const domain = await trx
      .insertInto('custom_domains')
      .values(row)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordEvents(trx, 'custom_domain', 'created', [domain]);
    return domain;
  });
}

const domainsTable = (db: Db) => db.selectFrom('custom_domains');

/**
 * Updates the domains `where` picks (locked first) with `set`, recording an `updated` event for each
 * whose event state changed; how many it updated.
 */
async function updateDomains(
  db: Db,
  where: (q: ReturnType<typeof domainsTable>) => ReturnType<typeof domainsTable>,
  set: Updateable<CustomDomainsTable>,
): Promise<number> {
  return inTransaction(db, async (trx) => {
    const rows = await trx
      .updateTable('custom_domains')
      .from(
        where(domainsTable(trx))
          .select(['id as before_id', eventState('custom_domain', 'custom_domains').as('before_state')])
          .forNoKeyUpdate()
          .as('before'),
      )
      .set(set)
      .whereRef('custom_domains.id', '=', 'before.before_id')
      .returningAll('custom_domains')
      .returning(changedSince('custom_domain', 'custom_domains').as('changed'))
      .execute();
    await recordEvents(
      trx,
      'custom_domain',
      'updated',
      rows.filter((r) => r.changed),
    );
    return rows.length;
  });
}

/** Held by any account, in any state but deleted. */
export async function domainTaken(db: Db, domain: string): Promise<boolean> {
  const row = await db
    .selectFrom('custom_domains')
    .select('id')
    .where('domain', '=', domain)
    .where('state', '!=', 'deleted')
    .executeTakeFirst();
  return row !== undefined;
}

/** Scoped to the service (itself already scoped to the account). */
export async function findCustomDomain(
  db: Db,
  serviceId: string,
  id: string,
): Promise<CustomDomainRow | undefined> {
  return db
    .selectFrom('custom_domains')
    .selectAll()
    .where('id', '=', id)
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
}

export async function findCustomDomainById(db: Db, id: string): Promise<CustomDomainRow | undefined> {
  return db.selectFrom('custom_domains').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findCustomDomainsByIds(db: Db, ids: string[]): Promise<CustomDomainRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('custom_domains').selectAll().where('id', 'in', ids).execute();
}

const HELD_STATES = CUSTOM_DOMAIN_STATES.filter((state) => state !== 'deleted');

/** The newest domain the service holds (in any state but deleted), if any. */
export async function heldDomain(db: Db, serviceId: string): Promise<CustomDomainRow | undefined> {
  return newestDomainIn(db, serviceId, HELD_STATES);
}

/** The newest domain of a service in one of `states`. */
export async function newestDomainIn(db: Db, serviceId: string, states: CustomDomainState[]) {
  return db
    .selectFrom('custom_domains')
    .selectAll()
    .where('service_id', '=', serviceId)
    .where('state', 'in', states)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** Every state change goes through here: from one of `from` to `to`; false when it was elsewhere. */
export async function transitionCustomDomain(
  db: Db,
  id: string,
  from: CustomDomainState[],
  to: CustomDomainState,
  extra: { prov_custom_domain_id?: string; failure_reason?: string } = {},
): Promise<boolean> {
  const updated = await updateDomains(db, (q) => q.where('id', '=', id).where('state', 'in', from), {
    state: to,
    ...extra,
    updated_at: new Date(),
  });
  return updated > 0;
}

export async function retireAllDomains(db: Db, serviceId: string): Promise<void> {
  await updateDomains(db, (q) => q.where('service_id', '=', serviceId).where('state', '!=', 'deleted'), {
    state: 'deleted',
    updated_at: new Date(),
  });
}

/** The domain names a service is served under: its deployed domains, and any named in `also`. */
export async function servedDomains(db: Db, serviceId: string, also: string[] = []): Promise<string[]> {
  const rows = await db
    .selectFrom('custom_domains')
    .select('domain')
    .where('service_id', '=', serviceId)
    .where('state', '=', 'deployed')
    .execute();
  return servingNames(
    rows.map((r) => r.domain),
    also,
  );
}

/** `deployed` and `also` as one sorted list of names (servedDomains, from domains already read). */
export function servingNames(deployed: string[], also: string[] = []): string[] {
  return [...new Set([...deployed, ...also])].sort();
}

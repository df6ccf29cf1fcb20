import { sql } from 'kysely';
import { compiled } from '../compiled.ts';
import type { Db } from '../database.ts';
import type { CustomDomainRow, DeploymentRow, EnvironmentRow, ServiceRow } from '../schema.ts';

/**
 * The service a request names, with its environment, its latest deployment and its active custom
 * domain, in one indexed query (a primary-key lookup joined on primary keys). Scoped: another account's
 * service is not found.
 */
export async function findServiceInScope(
  db: Db,
  accountId: string,
  environmentId: string,
  serviceId: string,
) {
  const row = await serviceInScope.executeTakeFirst(db, { accountId, environmentId, serviceId });
  if (!row) return undefined;
  const { _environment, _latest, _domain, ...service } = row;
  return {
    service: service satisfies ServiceRow,
    environment: withDates<EnvironmentRow>(_environment),
    latestDeployment: _latest ? withDates<DeploymentRow>(_latest) : null,
    activeDomain: _domain ? withDates<CustomDomainRow>(_domain) : null,
  };
}

const serviceInScope = compiled(
  (
    db,
    { accountId, environmentId, serviceId }: { accountId: string; environmentId: string; serviceId: string },
  ) =>
    db
      .selectFrom('services as s')
      .innerJoin('environments as e', 'e.id', 's.environment_id')
      .leftJoin('deployments as d', 'd.id', 's.latest_deployment_id')
      .leftJoin('custom_domains as c', (join) =>
        join.onRef('c.id', '=', 's.custom_domain_id').on('c.state', '=', 'deployed'),
      )
      .selectAll('s')
      .select([
        sql<AsJson<EnvironmentRow>>`to_jsonb(e.*)`.as('_environment'),
        sql<AsJson<DeploymentRow> | null>`to_jsonb(d.*)`.as('_latest'),
        sql<AsJson<CustomDomainRow> | null>`to_jsonb(c.*)`.as('_domain'),
      ])
      .where('s.id', '=', serviceId)
      .where('s.environment_id', '=', environmentId)
      .where('s.account_id', '=', accountId),
);

export interface Stamped {
  created_at: Date;
  updated_at: Date;
}

/** A row as to_jsonb renders it: its timestamps as text. */
export type AsJson<T extends Stamped> = Omit<T, keyof Stamped> & { created_at: string; updated_at: string };

/** Turns to_jsonb's timestamps back into Dates. */
export function withDates<T extends Stamped>(record: AsJson<T>): Omit<T, keyof Stamped> & Stamped {
  return { ...record, created_at: new Date(record.created_at), updated_at: new Date(record.updated_at) };
}

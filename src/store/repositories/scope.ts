import { sql } from 'kysely';
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
  const row = await db
    .selectFrom('services as s')
    .innerJoin('environments as e', 'e.id', 's.environment_id')
    .leftJoin('deployments as d', 'd.id', 's.latest_deployment_id')
    .leftJoin('custom_domains as c', (join) =>
      join.onRef('c.id', '=', 's.custom_domain_id').on('c.state', '=', 'deployed'),
    )
    .selectAll('s')
    .select([
      sql<Record<string, unknown>>`to_jsonb(e.*)`.as('_environment'),
      sql<Record<string, unknown> | null>`to_jsonb(d.*)`.as('_latest'),
      sql<Record<string, unknown> | null>`to_jsonb(c.*)`.as('_domain'),
    ])
    .where('s.id', '=', serviceId)
    .where('s.environment_id', '=', environmentId)
    .where('s.account_id', '=', accountId)
    .executeTakeFirst();
  if (!row) return undefined;
  const { _environment, _latest, _domain, ...service } = row;
  return {
    service: service as ServiceRow,
    environment: withDates(_environment) as unknown as EnvironmentRow,
    latestDeployment: _latest ? (withDates(_latest) as unknown as DeploymentRow) : null,
    activeDomain: _domain ? (withDates(_domain) as unknown as CustomDomainRow) : null,
  };
}

/** to_jsonb renders timestamps as text; turn them back into Dates. */
function withDates(record: Record<string, unknown>): Record<string, unknown> {
  const out = { ...record };
  for (const key of ['created_at', 'updated_at'])
    if (typeof out[key] === 'string') out[key] = new Date(out[key] as string);
  return out;
}

import { sql } from 'kysely';
import type { DeploymentState, DeploymentType } from '../../domain/deployment-states.ts';
import { TERMINAL_DEPLOYMENT_STATES } from '../../domain/deployment-states.ts';
import type { ServiceSample } from '../../providers/provider.ts';
import type { Db } from '../database.ts';

export const MINUTE_S = 60;
export const HOUR_S = 3600;
/** Minute rows older than this are folded into hour rows. */
export const MINUTES_KEPT_MS = 24 * 3_600_000;

/** The start of the minute `at` falls in. */
export function minuteOf(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 60_000) * 60_000);
}

/**
 * Stores minute samples. Another process that sampled the same service in the same minute was first:
 * its row stays (collectors running in several processes write each minute once).
 */
export async function insertMinuteSamples(
  db: Db,
  samples: { serviceId: string; at: Date; values: ServiceSample }[],
): Promise<void> {
  if (samples.length === 0) return;
  await db
    .insertInto('service_metrics')
    .values(
      samples.map(({ serviceId, at, values }) => ({
        service_id: serviceId,
        resolution_s: MINUTE_S,
        at: minuteOf(at),
        samples: 1,
        ...values,
      })),
    )
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** A mean of `column` over the rows that have it, each row counting as much as its `weight`. */
const weightedBy = (weight: 'samples' | 'requests', column: keyof ServiceSample) =>
  `sum(${column} * ${weight}) / nullif(sum(${weight}) FILTER (WHERE ${column} IS NOT NULL), 0)`;

/**
 * How the rows of a span combine into one value, per column: sums of counts, averages weighted by the
 * minutes they stand for, the largest limit, request-weighted means of the latency percentiles. The
 * hour fold and the reads of any step both use it, so a point reads the same from minutes or hours.
 */
const COMBINED: Record<keyof ServiceSample, string> = {
  cpu_cores: weightedBy('samples', 'cpu_cores'),
  memory_bytes: `round(${weightedBy('samples', 'memory_bytes')})`,
  memory_limit_bytes: 'max(memory_limit_bytes)',
  restarts: 'sum(restarts)',
  network_rx_bytes: 'sum(network_rx_bytes)',
  network_tx_bytes: 'sum(network_tx_bytes)',
  requests: 'sum(requests)',
  status_2xx: 'sum(status_2xx)',
  status_3xx: 'sum(status_3xx)',
  status_4xx: 'sum(status_4xx)',
  status_5xx: 'sum(status_5xx)',
  latency_p50_ms: weightedBy('requests', 'latency_p50_ms'),
  latency_p95_ms: weightedBy('requests', 'latency_p95_ms'),
  latency_p99_ms: weightedBy('requests', 'latency_p99_ms'),
};
const VALUE_COLUMNS = Object.keys(COMBINED) as (keyof ServiceSample)[];

/** The advisory lock that makes one process at a time compact the metrics (others skip their turn). */
const COMPACT_LOCK = 7342029;

/**
 * The downsample and retention pass, as of `now`: rows older than `retentionDays` go, then minute rows
 * from before the last day's first whole hour are folded into one row per service and hour (as COMBINED
 * says). One transaction, so a reader never sees an hour both ways. Null when another process holds the
 * pass.
 */
export async function compactServiceMetrics(
  db: Db,
  now: Date,
  retentionDays: number,
): Promise<{ dropped: number; folded: number } | null> {
  const keepFrom = new Date(now.getTime() - retentionDays * 86_400_000);
  const foldBefore = new Date(Math.floor((now.getTime() - MINUTES_KEPT_MS) / 3_600_000) * 3_600_000);
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{
      locked: boolean;
    }>`SELECT pg_try_advisory_xact_lock(${COMPACT_LOCK}) AS locked`.execute(trx);
    if (!rows[0]?.locked) return null;
    const dropped = await trx.deleteFrom('service_metrics').where('at', '<', keepFrom).executeTakeFirst();
    const folded = await sql<{ count: number }>`
      WITH moved AS (
        DELETE FROM service_metrics WHERE resolution_s = ${MINUTE_S} AND at < ${foldBefore} RETURNING *
      ), hours AS (
        INSERT INTO service_metrics (service_id, resolution_s, at, samples, ${sql.raw(VALUE_COLUMNS.join(', '))})
        SELECT service_id, ${sql.lit(HOUR_S)}, to_timestamp(floor(extract(epoch FROM at) / ${sql.lit(HOUR_S)}) * ${sql.lit(HOUR_S)}),
          sum(samples), ${sql.raw(VALUE_COLUMNS.map((column) => COMBINED[column]).join(', '))}
        FROM moved GROUP BY 1, 3
        ON CONFLICT DO NOTHING
        RETURNING 1
      )
      SELECT count(*)::integer AS count FROM hours`.execute(trx);
    return { dropped: Number(dropped.numDeletedRows), folded: folded.rows[0]?.count ?? 0 };
  });
}

/** One point of a service's series: the rows of one step, combined as the downsampling combines them. */
export interface MetricsPoint extends ServiceSample {
  time: Date;
  /** How many minute samples the point stands for. */
  samples: number;
}

/**
 * A service's series from `from` (inclusive) to `to` (exclusive), one point per `stepS` seconds that has
 * samples, oldest first. Bigint sums are read as double precision: numbers, as JSON needs them.
 */
export async function readServiceMetrics(
  db: Db,
  serviceId: string,
  from: Date,
  to: Date,
  stepS: number,
): Promise<MetricsPoint[]> {
  const fromS = from.getTime() / 1000;
  const { rows } = await sql<{ bucket: number } & Omit<MetricsPoint, 'time'>>`
    SELECT floor((extract(epoch FROM at)::float8 - ${fromS}::float8) / ${stepS}::float8)::integer AS bucket,
      sum(samples)::integer AS samples,
      ${sql.raw(VALUE_COLUMNS.map((column) => `(${COMBINED[column]})::float8 AS ${column}`).join(',\n      '))}
    FROM service_metrics
    WHERE service_id = ${serviceId} AND at >= ${from} AND at < ${to}
    GROUP BY 1 ORDER BY 1`.execute(db);
  return rows.map(({ bucket, ...point }) => ({
    ...point,
    time: new Date(from.getTime() + bucket * stepS * 1000),
  }));
}

export interface DeploymentMarker {
  id: string;
  type: DeploymentType;
  state: DeploymentState;
  created_at: Date;
  /** When it ended (its last change, once final); null while it runs. */
  finished_at: Date | null;
}

/** At most this many markers per read: the newest. */
export const MAX_MARKERS = 500;

/** The service's deployments created in [from, to), oldest first: markers on a chart's time axis. */
export async function deploymentMarkers(
  db: Db,
  serviceId: string,
  from: Date,
  to: Date,
): Promise<DeploymentMarker[]> {
  const rows = await db
    .selectFrom('deployments')
    .select(['id', 'type', 'state', 'created_at', 'updated_at'])
    .where('service_id', '=', serviceId)
    .where('created_at', '>=', from)
    .where('created_at', '<', to)
    .orderBy('created_at', 'desc')
    .limit(MAX_MARKERS)
    .execute();
  return rows.reverse().map(({ updated_at, ...row }) => ({
    ...row,
    finished_at: TERMINAL_DEPLOYMENT_STATES.includes(row.state) ? updated_at : null,
  }));
}

/**
 * Live services someone deployed, with what a metrics sample needs, that have no sample yet for the
 * minute `at` falls in: the ones the collector samples. Those sampled already (by this process's earlier
 * round, or another process's) wait for the next minute, so that each sample spans about a minute and
 * what it takes (the ingress's counts) is never taken for a row that is not stored.
 */
export async function sampledServices(db: Db, at: Date) {
  return db
    .selectFrom('service_observations as o')
    .innerJoin('services as s', 's.id', 'o.service_id')
    .select([
      's.id',
      's.account_id',
      's.environment_id',
      's.type',
      's.subdomain',
      's.replica_count',
      's.memory_mb_max',
    ])
    .where('s.is_deleted', '=', false)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('service_metrics as m')
            .select('m.service_id')
            .whereRef('m.service_id', '=', 's.id')
            .where('m.resolution_s', '=', MINUTE_S)
            .where('m.at', '=', minuteOf(at)),
        ),
      ),
    )
    .execute();
}

import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

/**
 * Each service's runtime metrics: one row a minute (`resolution_s` 60) from the collector, folded into
 * one row an hour (3600) after a day, dropped after BERTH_METRICS_RETENTION_DAYS
 * (store/repositories/service-metrics.ts). `samples` is how many minute samples a row stands for, so
 * averages over rows of both resolutions weigh each minute alike. No foreign key: a deleted service's
 * rows go with the retention, and the collector's inserts check nothing. No index on `at` alone: the
 * pass that scans by it runs every ten minutes over a table the retention keeps small, while every
 * insert would pay for one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    `CREATE TABLE service_metrics (
      service_id uuid NOT NULL,
      resolution_s integer NOT NULL,
      at timestamptz NOT NULL,
      samples integer NOT NULL,
      cpu_cores double precision,
      memory_bytes bigint,
      memory_limit_bytes bigint,
      restarts integer,
      network_rx_bytes bigint,
      network_tx_bytes bigint,
      requests integer NOT NULL,
      status_2xx integer NOT NULL,
      status_3xx integer NOT NULL,
      status_4xx integer NOT NULL,
      status_5xx integer NOT NULL,
      latency_p50_ms real,
      latency_p95_ms real,
      latency_p99_ms real,
      PRIMARY KEY (service_id, at, resolution_s)
    )`,
  ]);
}

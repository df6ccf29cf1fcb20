import type { ColumnType, Generated } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { OpsConfig } from '../../domain/ops-json.ts';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';

/**
 * The Engine drivers' routing table (docker, swarm), written at apply time from the desired state:
 * which deployment's replicas serve a service, at which generation, under which host names, with which
 * ops.json. The ingress and the cron scheduler read only this (never Berth's services or custom_domains).
 */
export interface DockerRoutesTable {
  service_id: string;
  deployment_id: string;
  port: number | null;
  ops: ColumnType<OpsConfig, string, string>;
  /** The generation in place (bigint: read as a string); an older one never replaces it. */
  generation: string | number;
  /** Null for a removed service (its tombstone). */
  subdomain: string | null;
  environment_id: string | null;
  type: string | null;
  /** Active custom domains (lower case). */
  domains: ColumnType<string[], string, string>;
  updated_at: Generated<Date>;
}

/**
 * What the ingress answered per service, written every few seconds by the process serving it
 * (traffic.ts) and taken away by the next metrics sample of the service, in whichever process collects.
 */
export interface DockerIngressTrafficTable {
  id: Generated<string>;
  service_id: string;
  requests: number;
  /** Answers by status class: [1xx, 2xx, 3xx, 4xx, 5xx]. */
  classes: ColumnType<number[], string, string>;
  /** A uniform sample of the requests' latencies, in milliseconds. */
  latencies: ColumnType<number[], string, string>;
  written_at: Generated<Date>;
}

/** One row per cron tick claimed (cron-ticks.ts): a tick runs in the one process whose insert landed. */
export interface DockerCronTicksTable {
  service_id: string;
  /** '' for a cron service's run; an ops.json cron job's schedule and path. */
  job: string;
  tick_at: ColumnType<Date, Date, Date>;
}

export type DockerTables = {
  docker_routes: DockerRoutesTable;
  docker_ingress_traffic: DockerIngressTrafficTable;
  docker_cron_ticks: DockerCronTicksTable;
};

export function dockerTables(db: Db) {
  return db.withTables<DockerTables>();
}

export type DockerDb = ReturnType<typeof dockerTables>;

export const dockerMigrations: Record<string, Migration> = {
  // Berth's own migration 0004 created this table before drivers had migrations: a database it
  // migrated has it already (see migrations.ts), so it is created only where missing.
  '0000-routes': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE IF NOT EXISTS docker_routes (
          service_id uuid PRIMARY KEY,
          deployment_id uuid NOT NULL,
          port integer,
          ops jsonb NOT NULL,
          updated_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
        )`,
      ]),
  },
  // A route from before these columns has no host names until its service's next apply: the driver
  // reads no table of Berth's, so it does not copy them from there.
  '0001-desired-routes': {
    up: (db) =>
      runStatements(db, [
        'ALTER TABLE docker_routes ADD COLUMN generation bigint NOT NULL DEFAULT 0',
        'ALTER TABLE docker_routes ADD COLUMN subdomain text',
        'ALTER TABLE docker_routes ADD COLUMN environment_id uuid',
        'ALTER TABLE docker_routes ADD COLUMN type text',
        `ALTER TABLE docker_routes ADD COLUMN domains jsonb NOT NULL DEFAULT '[]'`,
        'CREATE INDEX docker_routes_by_subdomain ON docker_routes (subdomain)',
        'CREATE INDEX docker_routes_by_domain ON docker_routes USING gin (domains jsonb_path_ops)',
      ]),
  },
  // No foreign key: the driver's tables never reference Berth's. Rows no sample took (a deleted
  // service's last requests) are dropped by the writes after an hour (traffic.ts).
  '0002-ingress-traffic': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE docker_ingress_traffic (
          id bigserial PRIMARY KEY,
          service_id uuid NOT NULL,
          requests integer NOT NULL,
          classes jsonb NOT NULL,
          latencies jsonb NOT NULL,
          written_at timestamptz(3) NOT NULL DEFAULT clock_timestamp()
        )`,
        'CREATE INDEX docker_ingress_traffic_by_service ON docker_ingress_traffic (service_id)',
      ]),
  },
  // The swarm driver claimed its ticks in tables of its own (dropped by its 0003); the docker driver
  // claimed none, so two `berth serve` sharing an engine both ran every tick.
  '0003-cron-ticks': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE docker_cron_ticks (
          service_id uuid NOT NULL,
          job text NOT NULL,
          tick_at timestamptz(3) NOT NULL,
          PRIMARY KEY (service_id, job, tick_at)
        )`,
      ]),
  },
};

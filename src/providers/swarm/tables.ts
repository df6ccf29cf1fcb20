import type { ColumnType } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';
import type { DockerTables } from '../engine/tables.ts';

/**
 * The swarm driver's own table: one row per cron tick claimed. Every `berth serve` schedules every cron
 * service; the process whose insert of (service, scheduled time) lands runs the tick, the others see the
 * row and skip it, so a tick runs once however many Berth processes there are.
 */
export interface SwarmCronTicksTable {
  service_id: string;
  tick_at: ColumnType<Date, Date, Date>;
  claimed_at: ColumnType<Date, Date, Date>;
}

/**
 * The node each ops.json dependency is pinned to (its data is a volume on that node), chosen at its first
 * provision, with the image it runs (resolved to a digest then: a tag that moves never changes a
 * database's engine under its data).
 */
export interface SwarmDependenciesTable {
  /** The dependency's swarm service: `berth-dep-<name>`. */
  name: string;
  node_id: string;
  image: string;
  created_at: ColumnType<Date, Date, Date>;
}

/** One row per tick of an ops.json cron job claimed, as swarm_cron_ticks for cron services. */
export interface SwarmOpsCronTicksTable {
  service_id: string;
  /** The job: its schedule and path. */
  job: string;
  tick_at: ColumnType<Date, Date, Date>;
}

/** The routing table is the Engine-API drivers' shared one (engine/routes.ts); the rest are ours. */
export type SwarmTables = DockerTables & {
  swarm_cron_ticks: SwarmCronTicksTable;
  swarm_dependencies: SwarmDependenciesTable;
  swarm_ops_cron_ticks: SwarmOpsCronTicksTable;
};

export function swarmTables(db: Db) {
  return db.withTables<SwarmTables>();
}

export type SwarmDb = ReturnType<typeof swarmTables>;

export const swarmMigrations: Record<string, Migration> = {
  '0000-cron-ticks': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE IF NOT EXISTS swarm_cron_ticks (
          service_id uuid NOT NULL,
          tick_at timestamptz(3) NOT NULL,
          claimed_at timestamptz(3) NOT NULL,
          PRIMARY KEY (service_id, tick_at)
        )`,
      ]),
  },
  '0001-dependency-nodes': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE swarm_dependencies (
          name text PRIMARY KEY,
          node_id text NOT NULL,
          image text NOT NULL,
          created_at timestamptz(3) NOT NULL
        )`,
      ]),
  },
  '0002-ops-cron-ticks': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE swarm_ops_cron_ticks (
          service_id uuid NOT NULL,
          job text NOT NULL,
          tick_at timestamptz(3) NOT NULL,
          PRIMARY KEY (service_id, job, tick_at)
        )`,
      ]),
  },
};

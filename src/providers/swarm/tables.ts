import type { ColumnType } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';
import type { DockerTables } from '../engine/tables.ts';

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

/**
 * The routing table and the cron ticks claimed are the Engine-API drivers' shared ones (engine/tables.ts);
 * the rest are ours.
 */
export type SwarmTables = DockerTables & {
  swarm_dependencies: SwarmDependenciesTable;
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
  // Ticks are claimed in the Engine drivers' shared docker_cron_ticks since (engine/cron-ticks.ts).
  '0003-shared-cron-ticks': {
    up: (db) => runStatements(db, ['DROP TABLE swarm_cron_ticks', 'DROP TABLE swarm_ops_cron_ticks']),
  },
};

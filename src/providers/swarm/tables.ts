import type { ColumnType } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';
import type { DockerTables } from '../docker/tables.ts';

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

/** The routing table is the Engine-API drivers' shared one (docker/routes.ts); the tick claims are ours. */
export type SwarmTables = DockerTables & { swarm_cron_ticks: SwarmCronTicksTable };

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
};

import type { Generated } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';

/**
 * The simulated cloud's own tables: its world (what runs where, at which generation) and a record of
 * every call, which tests use to prove ordering and exactly-once execution. Both were created by
 * Berth's migration 0002 before drivers had migrations of their own; changes since are the driver's.
 */
export interface SimWorkloadsTable {
  service_id: string;
  deployment_id: string;
  target: string;
  replicas: number;
  run_status: string;
  /** The generation in place (bigint: read as a string); an older one never replaces it. */
  generation: string | number;
  updated_at: Generated<Date>;
}

export interface SimCallsTable {
  id: Generated<string>;
  operation: string;
  subject_id: string;
  service_id: string | null;
  worker: string;
  outcome: string | null;
  started_at: Generated<Date>;
  finished_at: Date | null;
}

export type SimTables = {
  sim_workloads: SimWorkloadsTable;
  sim_calls: SimCallsTable;
};

export function simTables(db: Db) {
  return db.withTables<SimTables>();
}

export type SimDb = ReturnType<typeof simTables>;

export const simMigrations: Record<string, Migration> = {
  '0001-generation': {
    up: (db) =>
      runStatements(db, ['ALTER TABLE sim_workloads ADD COLUMN generation bigint NOT NULL DEFAULT 0']),
  },
};

import type { ColumnType, Generated } from 'kysely';
import type { Migration } from 'kysely/migration';
import type { Db } from '../../store/database.ts';
import { runStatements } from '../../store/migrations/run-statements.ts';

/**
 * The simulated cloud's own tables: its world (what runs where, at which generation) and a record of
 * every call, which tests use to prove ordering and exactly-once execution.
 * @module
 */

export interface SimWorkloadsTable {
  service_id: string;
  deployment_id: string;
  target: string;
  replicas: number;
  run_status: string;
  /** The generation in place (bigint: read as a string); an older one never replaces it. */
  generation: string | number;
  /** ops.json `cron.cron_jobs` of the version in place, with the URL each tick requests. */
  cron_jobs: ColumnType<unknown, string | undefined, string>;
  /**
   * The variables its replicas were given: each name with the SHA-256 of its value (hex), never the
   * value, as the secrets table keeps values sealed.
   */
  variables: ColumnType<Record<string, string>, string | undefined, string>;
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

/** The simulated cloud's resources (ops.json dependencies), with the password it generated. */
export interface SimResourcesTable {
  service_id: string;
  kind: string;
  type: string;
  resource_id: string;
  prefix: string;
  spec: ColumnType<unknown, string, string>;
  attributes: ColumnType<Record<string, string>, string, string>;
  password: string | null;
  created_at: Generated<Date>;
}

/**
 * The simulated git host's files: what a repository holds at a commit. `commit_id` '' is a file the
 * repository has at every commit without one of its own (tests write these rows to give a repository
 * an ops.json).
 */
export interface SimRepositoryFilesTable {
  repo: string;
  commit_id: string;
  path: string;
  content: string;
}

/** The simulated secret store: a scope's secrets as last written, each value as its SHA-256 (hex). */
export interface SimSecretsTable {
  scope: string;
  scope_id: string;
  name: string;
  digest: string;
}

export type SimTables = {
  sim_workloads: SimWorkloadsTable;
  sim_calls: SimCallsTable;
  sim_resources: SimResourcesTable;
  sim_repository_files: SimRepositoryFilesTable;
  sim_secrets: SimSecretsTable;
};

export function simTables(db: Db) {
  return db.withTables<SimTables>();
}

export type SimDb = ReturnType<typeof simTables>;

export const simMigrations: Record<string, Migration> = {
  // Berth's own migration 0002 created these tables before drivers had migrations: a database it
  // migrated has them already (see migrations.ts), so they are created only where missing.
  '0000-tables': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE IF NOT EXISTS sim_workloads (
          service_id uuid PRIMARY KEY,
          deployment_id uuid NOT NULL,
          target text NOT NULL,
          replicas integer NOT NULL,
          run_status text NOT NULL,
          updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )`,
        `CREATE TABLE IF NOT EXISTS sim_calls (
          id bigserial PRIMARY KEY,
          operation text NOT NULL,
          subject_id uuid NOT NULL,
          service_id uuid,
          worker text NOT NULL,
          outcome text,
          started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          finished_at timestamptz
        )`,
        'CREATE INDEX IF NOT EXISTS sim_calls_by_subject ON sim_calls (subject_id)',
      ]),
  },
  '0001-generation': {
    up: (db) =>
      runStatements(db, ['ALTER TABLE sim_workloads ADD COLUMN generation bigint NOT NULL DEFAULT 0']),
  },
  '0002-resources': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE sim_resources (
          service_id uuid NOT NULL,
          kind text NOT NULL,
          type text NOT NULL,
          resource_id text NOT NULL,
          prefix text NOT NULL,
          spec jsonb NOT NULL,
          attributes jsonb NOT NULL,
          password text,
          created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          PRIMARY KEY (service_id, kind, type, resource_id)
        )`,
      ]),
  },
  '0003-cron-jobs': {
    up: (db) =>
      runStatements(db, ["ALTER TABLE sim_workloads ADD COLUMN cron_jobs jsonb NOT NULL DEFAULT '[]'"]),
  },
  '0004-repository-files': {
    up: (db) =>
      runStatements(db, [
        `CREATE TABLE sim_repository_files (
          repo text NOT NULL,
          commit_id text NOT NULL,
          path text NOT NULL,
          content text NOT NULL,
          PRIMARY KEY (repo, path, commit_id)
        )`,
      ]),
  },
  '0005-variables': {
    up: (db) =>
      runStatements(db, [
        "ALTER TABLE sim_workloads ADD COLUMN variables jsonb NOT NULL DEFAULT '{}'",
        `CREATE TABLE sim_secrets (
          scope text NOT NULL,
          scope_id uuid NOT NULL,
          name text NOT NULL,
          digest text NOT NULL,
          PRIMARY KEY (scope, scope_id, name)
        )`,
      ]),
  },
};

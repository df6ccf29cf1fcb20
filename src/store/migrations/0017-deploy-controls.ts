import type { Kysely } from 'kysely';
import { runStatements } from './run-statements.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await runStatements(db, [
    // What a deployment ran with, recorded when it runs (a restore or restart copies it from the one it
    // brings back): its ops config as JSON and its variables as one sealed JSON object.
    'ALTER TABLE deployments ADD COLUMN ops_snapshot text',
    'ALTER TABLE deployments ADD COLUMN variables_sealed text',
    // The deployment a restore or restart brings back.
    'ALTER TABLE deployments ADD COLUMN restored_from uuid',
    // Set by a cancel of a deployment in progress; its worker stops before traffic moves.
    'ALTER TABLE deployments ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false',
  ]);
}

import { type Kysely, sql } from 'kysely';
import { type Migration, Migrator } from 'kysely/migration';
import * as spine from './migrations/0001-spine.ts';
import * as lifecycle from './migrations/0002-lifecycle.ts';
import * as customDomains from './migrations/0003-custom-domains.ts';
import * as subdomainIndex from './migrations/0004-subdomain-index.ts';
import * as settings from './migrations/0005-settings.ts';
import * as deployedSource from './migrations/0006-deployed-source.ts';
import * as generations from './migrations/0007-generations.ts';
import * as idempotencyKeys from './migrations/0009-idempotency-keys.ts';
import * as rateLimits from './migrations/0010-rate-limits.ts';
import * as idempotencyClaims from './migrations/0011-idempotency-claims.ts';
import * as secretJobScopes from './migrations/0012-secret-job-scopes.ts';
import * as changeNotifications from './migrations/0013-change-notifications.ts';
import * as opsJsonHostedDependencies from './migrations/0014-ops-json-hosted-dependencies.ts';
import * as deploymentLogs from './migrations/0015-deployment-logs.ts';
import * as serviceResources from './migrations/0016-service-resources.ts';
import * as deployControls from './migrations/0017-deploy-controls.ts';
import * as events from './migrations/0018-events.ts';
import * as webhooks from './migrations/0019-webhooks.ts';
import * as gitConnections from './migrations/0022-git-connections.ts';
import * as gitPollHeads from './migrations/0023-git-poll-heads.ts';
import * as repoOps from './migrations/0026-repo-ops.ts';
import * as gitHookRouting from './migrations/0027-git-hook-routing.ts';
import * as deploymentTimeline from './migrations/0028-deployment-timeline.ts';
import * as jobAccounts from './migrations/0029-job-accounts.ts';
import * as auditClientAddress from './migrations/0031-audit-client-address.ts';
import * as sealedIdempotentAnswers from './migrations/0032-sealed-idempotent-answers.ts';
import * as keyRotation from './migrations/0033-key-rotation.ts';
import * as dependencyBackups from './migrations/0034-dependency-backups.ts';
import * as serviceMetrics from './migrations/0035-service-metrics.ts';
import * as people from './migrations/0036-people.ts';
import * as dependencyRestoreCopies from './migrations/0037-dependency-restore-copies.ts';
import * as sessions from './migrations/0038-sessions.ts';
import * as invitations from './migrations/0039-invitations.ts';
import * as alerts from './migrations/0040-alerts.ts';
import * as certificates from './migrations/0041-certificates.ts';
import * as eventsInCode from './migrations/0042-events-in-code.ts';
import * as singleSignOn from './migrations/0043-single-sign-on.ts';
import * as acmeChallenges from './migrations/0044-acme-challenges.ts';
import * as apiCertificate from './migrations/0045-api-certificate.ts';
import * as deviceLogins from './migrations/0046-device-logins.ts';
import * as passkeys from './migrations/0047-passkeys.ts';
import * as changeNotificationsByColumn from './migrations/0048-change-notifications-by-column.ts';
import * as restartsAreServiceUpdates from './migrations/0049-restarts-are-service-updates.ts';
import * as idempotentAnswerHeaders from './migrations/0050-idempotent-answer-headers.ts';
import type { Database } from './schema.ts';

/** Every migration, in order. Listed here rather than read from disk so the build carries them. */
const migrations: Record<string, Migration> = {
  '0001-spine': spine,
  '0002-lifecycle': lifecycle,
  '0003-custom-domains': customDomains,
  // Recorded under its first name in existing databases: the name stays.
  '0004-docker': subdomainIndex,
  '0005-settings': settings,
  '0006-deployed-source': deployedSource,
  '0007-generations': generations,
  '0009-idempotency-keys': idempotencyKeys,
  '0010-rate-limits': rateLimits,
  '0011-idempotency-claims': idempotencyClaims,
  '0012-secret-job-scopes': secretJobScopes,
  '0013-change-notifications': changeNotifications,
  '0014-ops-json-hosted-dependencies': opsJsonHostedDependencies,
  '0015-deployment-logs': deploymentLogs,
  '0016-service-resources': serviceResources,
  '0017-deploy-controls': deployControls,
  '0018-events': events,
  '0019-webhooks': webhooks,
  '0022-git-connections': gitConnections,
  '0023-git-poll-heads': gitPollHeads,
  '0026-repo-ops': repoOps,
  '0027-git-hook-routing': gitHookRouting,
  '0028-deployment-timeline': deploymentTimeline,
  '0029-job-accounts': jobAccounts,
  '0031-audit-client-address': auditClientAddress,
  '0032-sealed-idempotent-answers': sealedIdempotentAnswers,
  '0033-key-rotation': keyRotation,
  '0034-dependency-backups': dependencyBackups,
  '0035-service-metrics': serviceMetrics,
  '0036-people': people,
  '0037-dependency-restore-copies': dependencyRestoreCopies,
  '0038-sessions': sessions,
  '0039-invitations': invitations,
  '0040-alerts': alerts,
  '0041-certificates': certificates,
  '0042-events-in-code': eventsInCode,
  '0043-single-sign-on': singleSignOn,
  '0044-acme-challenges': acmeChallenges,
  '0045-api-certificate': apiCertificate,
  '0046-device-logins': deviceLogins,
  '0047-passkeys': passkeys,
  '0048-change-notifications-by-column': changeNotificationsByColumn,
  '0049-restarts-are-service-updates': restartsAreServiceUpdates,
  '0050-idempotent-answer-headers': idempotentAnswerHeaders,
};

export class MigrationError extends Error {
  /** The migration that failed; undefined when none ran (the database could not be reached or locked). */
  readonly migration: string | undefined;
  constructor(message: string, migration?: string, cause?: unknown) {
    super(message, { cause });
    this.migration = migration;
  }
}

/** The names of every migration this build has. */
export const KNOWN_MIGRATIONS: readonly string[] = Object.keys(migrations);

// Kysely<Database> rather than database.ts's Db: database.ts runs the migrations, so importing it here would be a cycle.
function migratorOf(db: Kysely<Database>, only: readonly string[] = KNOWN_MIGRATIONS): Migrator {
  const chosen = Object.fromEntries(Object.entries(migrations).filter(([name]) => only.includes(name)));
  return new Migrator({
    db,
    provider: { getMigrations: async () => chosen },
    // Migrations written side by side may land in either order: one missing before the last that ran
    // still runs (each is written for the schema before it, whatever else ran).
    allowUnorderedMigrations: true,
  });
}

/** Runs the migrations not run yet; with `only`, just those of them (a restore rebuilds a backup's schema). */
export async function migrateToLatest(db: Kysely<Database>, only?: readonly string[]): Promise<void> {
  const { error, results } = await migratorOf(db, only).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    const message = (error as Error).message;
    if (failed === undefined) {
      throw new MigrationError(`The database could not be migrated: ${message}`, undefined, error);
    }
    throw new MigrationError(`Database migration ${failed} failed: ${message}`, failed);
  }
}

/** The migrations this build has that the database has not run (/ready: a process ahead of its schema). */
export async function pendingMigrations(db: Kysely<Database>): Promise<string[]> {
  const known = await migratorOf(db).getMigrations();
  return known.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/** The migrations the database has run, in the order they ran (none when it has no schema yet). */
export async function appliedMigrations(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ t: string | null }>`SELECT to_regclass('kysely_migration')::text AS t`.execute(
    db,
  );
  if (!rows[0]?.t) return [];
  const ran = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY timestamp, name`.execute(
    db,
  );
  return ran.rows.map((r) => r.name);
}

/** True when the database answers; /health uses it. */
export async function ping(db: Kysely<Database>): Promise<boolean> {
  try {
    await sql`SELECT 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}

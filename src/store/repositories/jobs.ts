import { type ExpressionBuilder, sql } from 'kysely';
import { compiled } from '../compiled.ts';
import type { Db } from '../database.ts';
import { recordJobRow } from '../events.ts';
import { jobAccountKey, TOPICS } from '../notifications.ts';
import type { Database, JobRow } from '../schema.ts';

/**
 * The durable job queue, in the same database as the state it changes.
 *
 * Glossary: a *job* names work by kind and subject id (never a payload snapshot: handlers re-read
 * state); the kind says what the subject is (a secrets job's kind names its scope). Jobs with the same *queue key* (a service id) run one at a time in the order they were
 * enqueued; only the oldest job of a queue can be claimed. A worker *claims* a job by taking a *lease*
 * (locked_by, locked_until) and renews it while it works; a job whose lease lapsed is claimed again.
 * Attempts are counted at claim time. A finished job is deleted.
 */
export const JOB_KINDS = [
  'provision_environment',
  'deploy',
  'delete_service',
  'write_service_secrets',
  'write_environment_secrets',
  'deploy_custom_domain',
  'retire_custom_domain',
  'deliver_webhook',
  'dependency_backup',
  'dependency_restore',
  'issue_certificate',
  'issue_ingress_certificate',
  'issue_api_certificate',
] as const;
export type JobKind = (typeof JOB_KINDS)[number];

export interface NewJob {
  kind: JobKind;
  subjectId: string;
  /** The account the job works for: workers budget their slots per account. */
  accountId: string;
  queueKey?: string | null;
  maxAttempts?: number;
}

/** Enqueue inside the caller's transaction, so the job exists exactly when the change does. */
export async function enqueue(db: Db, job: NewJob): Promise<void> {
  // The job and the workers' wake-up in one statement (NOTIFY is delivered at commit either way); the
  // kind wakes only the budgets that run it, the account none whose loops know it has used its share.
  await db
    .with('queued', (qc) =>
      qc
        .insertInto('jobs')
        .values({
          kind: job.kind,
          subject_id: job.subjectId,
          account_id: job.accountId,
          queue_key: job.queueKey ?? null,
          max_attempts: job.maxAttempts ?? 8,
        })
        .returning('seq'),
    )
    .selectFrom('queued')
    .select(sql`pg_notify(${TOPICS.jobs}, ${`${job.kind} ${jobAccountKey(job.accountId)}`})`.as('woken'))
    .execute();
}

/**
 * `enqueue`, written by the commit's statement (store/events.ts) instead of one of its own: for a
 * transaction that reads no jobs after queueing this one (accepting a deployment).
 */
export async function enqueueAtCommit(trx: Db, job: NewJob): Promise<void> {
  await recordJobRow(trx, {
    kind: job.kind,
    subject_id: job.subjectId,
    account_id: job.accountId,
    queue_key: job.queueKey ?? null,
    max_attempts: job.maxAttempts ?? 8,
  });
}

/** Which jobs a claim may take: of these kinds, and of no account in `fullAccounts`. */
export interface ClaimFilter {
  kinds: readonly JobKind[];
  /** Accounts that already use their whole budget of this worker's slots. */
  fullAccounts: readonly string[];
}

/**
 * A claimed job, and whether another job of the claim's kinds and accounts was due and free when it
 * was claimed (whatever its queue: one this claim could not take may be takeable when this job ends),
 * and one of another account than the job's.
 */
export type ClaimedJob = JobRow & { others_due: boolean; others_due_elsewhere: boolean };

export async function claim(
  db: Db,
  workerId: string,
  leaseMs: number,
  filter: ClaimFilter = { kinds: JOB_KINDS, fullAccounts: [] },
): Promise<ClaimedJob | undefined> {
  return claimStatement.executeTakeFirst(db, {
    workerId,
    lease: `${leaseMs} milliseconds`,
    kinds: filter.kinds,
    fullAccounts: filter.fullAccounts,
  });
}
const claimStatement = compiled(
  (
    _db,
    v: { workerId: string; lease: string; kinds: readonly JobKind[]; fullAccounts: readonly string[] },
  ) => {
    const accounts = (alias: string) =>
      v.fullAccounts.length === 0
        ? sql``
        : sql`AND (${sql.ref(`${alias}.account_id`)} IS NULL OR ${sql.ref(`${alias}.account_id`)} NOT IN (${sql.join(v.fullAccounts)}))`;
    const due = sql`k.seq <> jobs.seq AND k.run_after <= clock_timestamp()
      AND (k.locked_until IS NULL OR k.locked_until < clock_timestamp())
      AND k.kind IN (${sql.join(v.kinds)}) ${accounts('k')}`;
    return sql<ClaimedJob>`
    UPDATE jobs SET locked_by = ${v.workerId},
      locked_until = clock_timestamp() + ${v.lease}::interval,
      attempts = attempts + 1
    WHERE seq = (
      SELECT j.seq FROM jobs j
      WHERE j.run_after <= clock_timestamp()
        AND (j.locked_until IS NULL OR j.locked_until < clock_timestamp())
        AND j.kind IN (${sql.join(v.kinds)})
        ${accounts('j')}
        AND (j.queue_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM jobs older WHERE older.queue_key = j.queue_key AND older.seq < j.seq))
      ORDER BY j.run_after, j.seq
      LIMIT 1
      FOR UPDATE SKIP LOCKED)
    RETURNING *, EXISTS (SELECT 1 FROM jobs k WHERE ${due}) AS others_due,
      EXISTS (SELECT 1 FROM jobs k WHERE ${due} AND k.account_id IS DISTINCT FROM jobs.account_id) AS others_due_elsewhere`;
  },
);

/**
 * In how many milliseconds the first job of `kinds` comes due that was not due at `since` (the moment
 * the caller's claim started): its `run_after` (a retry's backoff) or the end of its lease (a job whose
 * worker stopped renewing it); 0 for one that came due since (the claim could not see it); undefined
 * when there is none. A worker whose claim found nothing sleeps until then, not on a fixed poll (the
 * embedded database: every job queued in the process is heard at once, see worker.ts). Jobs due before
 * `since` that the claim left (behind their queue's older job, of an account at its share) are not
 * counted: what holds them back wakes a loop when it ends.
 */
export async function nextDueInMs(
  db: Db,
  kinds: readonly JobKind[],
  since: Date,
): Promise<number | undefined> {
  const row = await nextDueStatement.executeTakeFirst(db, { kinds, since });
  return row?.in_ms == null ? undefined : Math.max(0, Number(row.in_ms));
}
const nextDueStatement = compiled((_db, v: { kinds: readonly JobKind[]; since: Date }) => {
  return sql<{ in_ms: number | null }>`
    SELECT (extract(epoch FROM min(greatest(run_after, locked_until)) - clock_timestamp()) * 1000)::float8 AS in_ms
    FROM jobs
    WHERE kind IN (${sql.join(v.kinds)}) AND greatest(run_after, locked_until) > ${v.since}`;
});

/** A claim: the job, the worker, and the attempt it claimed. A later claim of the same job differs. */
export interface Fence {
  seq: string;
  workerId: string;
  attempts: number;
}

const held = (fence: Fence) => (eb: ExpressionBuilder<Database, 'jobs'>) =>
  eb.and([
    eb('seq', '=', fence.seq),
    eb('locked_by', '=', fence.workerId),
    eb('attempts', '=', fence.attempts),
  ]);

/** Renews the lease; false when this worker no longer holds the job. */
export async function renewLease(db: Db, fence: Fence, leaseMs: number): Promise<boolean> {
  const result = await db
    .updateTable('jobs')
    .set({ locked_until: sql`clock_timestamp() + ${`${leaseMs} milliseconds`}::interval` })
    .where(held(fence))
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Inside a transaction that records work on the job's subject: true when this claim still holds the
 * job, which stays locked until the transaction ends, so no other worker can claim it before the work
 * commits; false (the caller rolls back) when another worker took it over.
 */
export async function holdClaim(db: Db, fence: Fence): Promise<boolean> {
  return (await holdJob.executeTakeFirst(db, fence)) !== undefined;
}

const holdJob = compiled((db, fence: Fence) =>
  db.selectFrom('jobs').select('seq').where(held(fence)).forUpdate(),
);

/** Removes a finished job; false (and nothing done) when the claim is no longer this worker's. */
export async function complete(db: Db, fence: Fence): Promise<boolean> {
  const result = await db.deleteFrom('jobs').where(held(fence)).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

/** Backoff: 1 s, 2 s, 4 s ... capped at one minute. */
export function backoffMs(attempts: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.max(0, attempts - 1));
}

/** Puts a failed job back, due after `delayMs` (by default the backoff above). */
export async function retryLater(
  db: Db,
  fence: Fence,
  error: string,
  delayMs = backoffMs(fence.attempts),
): Promise<void> {
  await db
    .updateTable('jobs')
    .set({
      locked_by: null,
      locked_until: null,
      last_error: error.slice(0, 2000),
      run_after: sql`clock_timestamp() + ${`${delayMs} milliseconds`}::interval`,
    })
    .where(held(fence))
    .execute();
}

/**
 * Removes the jobs of subjects that no worker holds (deployments cancelled by a delete). A job a worker
 * holds stays: its handler re-reads the subject, finds it cancelled, and completes it.
 */
export async function dropJobs(db: Db, kind: JobKind, subjectIds: string[]): Promise<void> {
  if (subjectIds.length === 0) return;
  await db
    .deleteFrom('jobs')
    .where('kind', '=', kind)
    .where('subject_id', 'in', subjectIds)
    .where((eb) =>
      eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', sql<Date>`clock_timestamp()`)]),
    )
    .execute();
}

/**
 * Frees every lease at once. Only for the embedded database: it has one process, so any lease in it
 * belongs to a process that is gone.
 */
export async function releaseAllLeases(db: Db): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ locked_by: null, locked_until: null })
    .where('locked_by', 'is not', null)
    .execute();
}

/** Per kind, the jobs waiting (due or not, held by no live lease) and how old the oldest of them is. */
export async function queuedJobs(db: Db): Promise<{ kind: string; count: number; oldestS: number }[]> {
  const result = await sql<{ kind: string; count: string; oldest_s: number }>`
    SELECT kind, count(*) AS count, extract(epoch FROM clock_timestamp() - min(created_at))::float8 AS oldest_s
    FROM jobs WHERE locked_until IS NULL OR locked_until < clock_timestamp()
    GROUP BY kind`.execute(db);
  return result.rows.map((r) => ({ kind: r.kind, count: Number(r.count), oldestS: Number(r.oldest_s) }));
}

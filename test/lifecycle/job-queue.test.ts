import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, test } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { TerminalError } from '../../src/jobs/errors.ts';
import { fencedClaim, type JobHandler, LostClaimError, Worker } from '../../src/jobs/worker.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import {
  backoffMs,
  claim,
  complete,
  dropJobs,
  enqueue,
  type Fence,
  holdClaim,
  JOB_KINDS,
  type JobKind,
  type NewJob,
  queuedJobs,
  releaseAllLeases,
  renewLease,
  retryLater,
} from '../../src/store/repositories/jobs.ts';
import type { JobRow } from '../../src/store/schema.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * The queue's SQL (store/repositories/jobs.ts), one operation at a time, on a bare store: enqueue, claim
 * (order, queues, leases, the budgets' filter, two claimers at once), renew, hold, complete, retry, drop.
 * No app and no worker runs here unless a test starts one, so each test decides who claims what.
 */
let database: TestDatabase;
let store: Store;
let db: Store['db'];
/** Every statement the store ran. */
const queries: string[] = [];
before(async () => {
  database = await createTestDatabase();
  store = await openStore({
    databaseUrl: database.databaseUrl,
    dataDir: database.dataDir,
    onQuery: (query) => queries.push(query),
  });
  db = store.db;
});
after(async () => {
  await store.close();
  await database.drop();
});
beforeEach(async () => {
  await db.deleteFrom('jobs').execute();
});

const ACCOUNT = randomUUID();

async function add(job: Partial<NewJob> = {}): Promise<JobRow> {
  const subjectId = job.subjectId ?? randomUUID();
  await enqueue(db, { kind: 'deploy', accountId: ACCOUNT, ...job, subjectId });
  return db
    .selectFrom('jobs')
    .selectAll()
    .where('subject_id', '=', subjectId)
    .orderBy('seq', 'desc')
    .executeTakeFirstOrThrow();
}

const fenceOf = (job: JobRow): Fence => ({
  seq: job.seq,
  workerId: job.locked_by ?? '',
  attempts: job.attempts,
});

const rowOf = (seq: string) => db.selectFrom('jobs').selectAll().where('seq', '=', seq).executeTakeFirst();

/** Milliseconds from the database's clock now to `column` of job `seq`. */
async function msUntil(seq: string, column: 'run_after' | 'locked_until'): Promise<number> {
  const { rows } = await sql<{ ms: string }>`
    SELECT extract(epoch FROM ${sql.ref(column)} - clock_timestamp()) * 1000 AS ms
    FROM jobs WHERE seq = ${seq}`.execute(db);
  return Number(rows[0]?.ms);
}

/** A claim that must find nothing; a lease of a minute, so a wrong claim would show. */
const claimsNothing = async (filter?: Parameters<typeof claim>[3]) =>
  assert.equal(await claim(db, 'nobody', 60_000, filter), undefined);

test('enqueue: the job exists exactly when its transaction commits, due now, unclaimed, and wakes workers', async () => {
  const woken: string[] = [];
  const unsubscribe = store.notifications.subscribe('jobs', { notified: (keys) => woken.push(...keys) });
  try {
    await store.notifications.start();
    const subjectId = randomUUID();
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await enqueue(trx, { kind: 'deploy', subjectId, accountId: ACCOUNT });
        throw new Error('the change failed');
      }),
      /the change failed/,
    );
    assert.equal(
      await db.selectFrom('jobs').select('seq').executeTakeFirst(),
      undefined,
      'rolled back with it',
    );

    const queueKey = randomUUID();
    const job = await add({ kind: 'delete_service', subjectId, queueKey });
    assert.deepEqual(
      {
        kind: job.kind,
        subject: job.subject_id,
        account: job.account_id,
        queue: job.queue_key,
        attempts: job.attempts,
        maxAttempts: job.max_attempts,
        lockedBy: job.locked_by,
        lockedUntil: job.locked_until,
        lastError: job.last_error,
      },
      {
        kind: 'delete_service',
        subject: subjectId,
        account: ACCOUNT,
        queue: queueKey,
        attempts: 0,
        maxAttempts: 8,
        lockedBy: null,
        lockedUntil: null,
        lastError: null,
      },
    );
    assert.ok((await msUntil(job.seq, 'run_after')) <= 0, 'due at once');
    assert.equal((await add({ maxAttempts: 3 })).max_attempts, 3);
    await pollUntil(
      'the commit to notify the jobs channel',
      async () => (woken.length > 0 ? true : undefined),
      {
        timeoutMs: 10_000,
      },
    );
    // Naming the kind: a worker wakes only the budget that runs it.
    assert.ok(woken.includes('delete_service'), woken.join(' '));
  } finally {
    unsubscribe();
  }
});

test('claim: the oldest due job, leased to the claimer for leaseMs, its attempt counted', async () => {
  const later = await add();
  await db
    .updateTable('jobs')
    .set({ run_after: sql`clock_timestamp() + interval '1 hour'` })
    .where('seq', '=', later.seq)
    .execute();
  const first = await add();
  const second = await add();

  const claimed = await claim(db, 'worker-a', 30_000);
  assert.equal(claimed?.seq, first.seq, 'oldest due first; one not due yet is passed over');
  assert.equal(claimed?.locked_by, 'worker-a');
  assert.equal(claimed?.attempts, 1);
  const lease = await msUntil(first.seq, 'locked_until');
  assert.ok(lease > 25_000 && lease <= 30_000, `leased for 30 s, got ${lease} ms`);

  assert.equal((await claim(db, 'worker-b', 30_000))?.seq, second.seq, 'a leased job is not claimed again');
  await claimsNothing();
});

test('claim: jobs of one queue run one at a time, oldest first, even while the oldest is leased', async () => {
  const queueKey = randomUUID();
  const first = await add({ queueKey });
  const second = await add({ queueKey });
  const elsewhere = await add({ queueKey: randomUUID() });

  assert.equal((await claim(db, 'w', 60_000))?.seq, first.seq);
  assert.equal((await claim(db, 'w', 60_000))?.seq, elsewhere.seq, 'another queue goes on');
  await claimsNothing();
  assert.equal(await complete(db, { seq: first.seq, workerId: 'w', attempts: 1 }), true);
  assert.equal((await claim(db, 'w', 60_000))?.seq, second.seq, 'the next one once the first is done');
});

test("claim: the budgets' filter takes only its kinds, and no job of an account at its share", async () => {
  const full = randomUUID();
  const other = randomUUID();
  const delivery = await add({ kind: 'deliver_webhook', accountId: full });
  const fullDeploy = await add({ kind: 'deploy', accountId: full });
  const otherDeploy = await add({ kind: 'deploy', accountId: other });
  // Jobs queued before jobs named their account (migration 0029) have none: no share limits them.
  const noAccount = await add({ kind: 'write_service_secrets' });
  await db.updateTable('jobs').set({ account_id: null }).where('seq', '=', noAccount.seq).execute();

  const others = JOB_KINDS.filter((kind) => kind !== 'deliver_webhook');
  const taken: string[] = [];
  for (;;) {
    const job = await claim(db, 'w', 60_000, { kinds: others, fullAccounts: [full] });
    if (!job) break;
    taken.push(job.seq);
  }
  assert.deepEqual(taken, [otherDeploy.seq, noAccount.seq], 'neither the delivery nor the full account');
  await claimsNothing({ kinds: ['deliver_webhook'], fullAccounts: [full] });
  assert.equal(
    (await claim(db, 'w', 60_000, { kinds: ['deliver_webhook'], fullAccounts: [] }))?.seq,
    delivery.seq,
  );
  assert.equal((await claim(db, 'w', 60_000, { kinds: others, fullAccounts: [] }))?.seq, fullDeploy.seq);
});

test('claim: says whether another job it could take was due, and whether one of another account was', async () => {
  const mine = randomUUID();
  const other = randomUUID();
  await add({ accountId: mine });
  await add({ accountId: mine });
  const first = await claim(db, 'w', 60_000);
  assert.equal(first?.others_due, true, 'the second job of the account');
  assert.equal(first?.others_due_elsewhere, false, 'of the same account');
  await add({ accountId: other });
  const second = await claim(db, 'w', 60_000);
  assert.equal(second?.account_id, mine);
  assert.deepEqual([second?.others_due, second?.others_due_elsewhere], [true, true]);
  const filtered = await claim(db, 'w', 60_000, { kinds: ['deliver_webhook'], fullAccounts: [] });
  assert.equal(filtered, undefined, "the filter is the claim's own");
  await add({ accountId: mine });
  const last = await claim(db, 'w', 60_000, { kinds: JOB_KINDS, fullAccounts: [mine] });
  assert.equal(last?.account_id, other);
  assert.deepEqual(
    [last?.others_due, last?.others_due_elsewhere],
    [false, false],
    'a job of a full account is not one this claim could take',
  );
});

test('claim races: a claimer skips the job another is claiming (SKIP LOCKED), never waits on it or takes it twice', async () => {
  const first = await add();
  const second = await add();
  let racing: Promise<JobRow | undefined> | undefined;
  const holding = await db.transaction().execute(async (trx) => {
    const job = await claim(trx, 'worker-a', 60_000);
    racing = claim(db, 'worker-b', 60_000);
    // Postgres: the second claimer answers while the first's row is still locked. The embedded database
    // has one connection: its second claim can only run after this commit, which is the same guarantee.
    if (store.kind === 'postgres') {
      const raced = await Promise.race([
        racing,
        new Promise<'blocked'>((resolve) => setTimeout(() => resolve('blocked'), 5000)),
      ]);
      assert.equal(
        raced === 'blocked' ? raced : raced?.seq,
        second.seq,
        'skips the locked row, without waiting',
      );
    }
    return job;
  });
  assert.equal(holding?.seq, first.seq);
  assert.equal((await racing)?.seq, second.seq);

  // Many claimers at once (as many connections as the pool gives): each job is claimed exactly once.
  await db.deleteFrom('jobs').execute();
  const jobs = await Promise.all(Array.from({ length: 12 }, () => add()));
  const claims = await Promise.all(Array.from({ length: 24 }, (_, i) => claim(db, `worker-${i}`, 60_000)));
  const won = claims.filter((job) => job !== undefined).map((job) => job.seq);
  assert.deepEqual(won.toSorted(), jobs.map((job) => job.seq).toSorted(), 'every job, each once');
  const rows = await db.selectFrom('jobs').select(['attempts', 'locked_by']).execute();
  assert.ok(rows.every((row) => row.attempts === 1 && row.locked_by !== null));
});

test('a lapsed lease is claimed again as a new attempt; the first claim can no longer renew, hold, complete or retry it', async () => {
  const job = await add();
  const firstClaim = await claim(db, 'worker-a', 100);
  assert.ok(firstClaim);
  const stale = fenceOf(firstClaim);
  assert.equal(await renewLease(db, stale, 100), true, 'renewed while held');

  const retaken = await pollUntil(
    'the lapsed lease to be claimed again',
    async () => claim(db, 'worker-b', 60_000),
    {
      timeoutMs: 10_000,
    },
  );
  assert.equal(retaken.seq, job.seq);
  assert.equal(retaken.attempts, 2);
  const holder = fenceOf(retaken);

  assert.equal(await renewLease(db, stale, 60_000), false);
  assert.equal(await db.transaction().execute((trx) => holdClaim(trx, stale)), false);
  assert.equal(await complete(db, stale), false);
  await retryLater(db, stale, 'late');
  assert.deepEqual(
    await db
      .selectFrom('jobs')
      .select(['locked_by', 'last_error'])
      .where('seq', '=', job.seq)
      .executeTakeFirst(),
    { locked_by: 'worker-b', last_error: null },
    'the holder keeps the job',
  );
  // The same worker's earlier attempt is stale too: a claim is the worker and the attempt.
  assert.equal(await complete(db, { ...holder, attempts: 1 }), false);

  assert.equal(await renewLease(db, holder, 60_000), true);
  assert.ok((await msUntil(job.seq, 'locked_until')) > 55_000, 'renewed for a whole lease');
  assert.equal(await complete(db, holder), true, 'only the holder completes it');
  assert.equal(await rowOf(job.seq), undefined);
});

test('hold: the holder keeps the job locked until its commit; finish ends it with the outcome, or not at all', async () => {
  const job = await add();
  const claimed = await claim(db, 'worker-a', 1);
  assert.ok(claimed);
  const fence = fenceOf(claimed);
  // The lease has lapsed, but a transaction that holds the claim still locks the row: no one takes it.
  await pollUntil('the lease to lapse', async () =>
    (await msUntil(job.seq, 'locked_until')) < 0 ? true : undefined,
  );
  await db.transaction().execute(async (trx) => {
    assert.equal(await holdClaim(trx, fence), true);
    if (store.kind === 'postgres') await claimsNothing();
  });

  // finish rolls back with its transaction: the job stays for the next attempt.
  await assert.rejects(
    db.transaction().execute(async (trx) => {
      await fencedClaim(fence).finish(trx);
      throw new Error('the outcome failed to commit');
    }),
    /the outcome failed/,
  );
  assert.ok(await rowOf(job.seq));
  const finished = fencedClaim(fence);
  await db.transaction().execute((trx) => finished.finish(trx));
  assert.equal(finished.finished, true);
  assert.equal(await rowOf(job.seq), undefined);
  await assert.rejects(
    db.transaction().execute((trx) => fencedClaim(fence).hold(trx)),
    LostClaimError,
    'a claim on a job that is gone holds nothing',
  );
});

test('retryLater: released with its error, due after the backoff (1 s doubling, at most a minute), then claimed again', async () => {
  assert.deepEqual(
    [1, 2, 3, 4, 6, 7, 8, 20].map(backoffMs),
    [1000, 2000, 4000, 8000, 32_000, 60_000, 60_000, 60_000],
  );
  const job = await add();
  const first = await claim(db, 'w', 60_000);
  assert.ok(first);
  await retryLater(db, fenceOf(first), `boom ${'x'.repeat(3000)}`);
  const row = await rowOf(job.seq);
  assert.equal(row?.locked_by, null);
  assert.equal(row?.locked_until, null);
  assert.equal(row?.last_error?.length, 2000, 'the error is kept, cut to 2000 characters');
  assert.ok(row?.last_error?.startsWith('boom '));
  const due = await msUntil(job.seq, 'run_after');
  assert.ok(due > 500 && due <= 1000, `due in the first backoff, 1 s; got ${due} ms`);
  await claimsNothing();

  const second = await pollUntil('the retry to be due', () => claim(db, 'w', 60_000), { timeoutMs: 10_000 });
  assert.equal(second.attempts, 2);
  await retryLater(db, fenceOf(second), 'again');
  const doubled = await msUntil(job.seq, 'run_after');
  assert.ok(doubled > 1500 && doubled <= 2000, `the second backoff is 2 s; got ${doubled} ms`);
  // The ninth attempt backs off by the cap.
  await db
    .updateTable('jobs')
    .set({ attempts: 8, run_after: sql`clock_timestamp()` })
    .where('seq', '=', job.seq)
    .execute();
  const ninth = await claim(db, 'w', 60_000);
  assert.equal(ninth?.attempts, 9);
  await retryLater(db, fenceOf(ninth as JobRow), 'late');
  const cap = await msUntil(job.seq, 'run_after');
  assert.ok(cap > 59_000 && cap <= 60_000, `at most a minute; got ${cap} ms`);

  await db
    .updateTable('jobs')
    .set({ run_after: sql`clock_timestamp()` })
    .where('seq', '=', job.seq)
    .execute();
  const third = await claim(db, 'w', 60_000);
  assert.ok(third);
  await retryLater(db, fenceOf(third), 'now', 0);
  assert.equal((await claim(db, 'w', 60_000))?.seq, job.seq, 'a delay of 0 is due at once');
});

test('dropJobs: removes the jobs of the subjects no worker holds, of that kind only', async () => {
  const unclaimed = await add();
  const held = await add();
  const lapsed = await add();
  const otherKind = await add({ kind: 'delete_service', subjectId: unclaimed.subject_id });
  const untouched = await add();
  await db
    .updateTable('jobs')
    .set({ locked_by: 'w', locked_until: sql`clock_timestamp() + interval '1 minute'` })
    .where('seq', '=', held.seq)
    .execute();
  await db
    .updateTable('jobs')
    .set({ locked_by: 'gone', locked_until: sql`clock_timestamp() - interval '1 second'` })
    .where('seq', '=', lapsed.seq)
    .execute();
  await dropJobs(db, 'deploy', [unclaimed.subject_id, held.subject_id, lapsed.subject_id]);
  await dropJobs(db, 'deploy', []);
  const left = await db.selectFrom('jobs').select('seq').orderBy('seq').execute();
  assert.deepEqual(
    left.map((row) => row.seq),
    [held.seq, otherKind.seq, untouched.seq],
    'a held job stays: its handler finds the subject cancelled and completes it',
  );
});

test('enqueue does not deduplicate: the same subject queued twice is two jobs, claimed in turn', async () => {
  const subjectId = randomUUID();
  const first = await add({ subjectId });
  const second = await add({ subjectId });
  assert.notEqual(first.seq, second.seq);
  assert.equal((await claim(db, 'w', 60_000))?.seq, first.seq);
  assert.equal((await claim(db, 'w', 60_000))?.seq, second.seq);
});

test('releaseAllLeases: every held job is free to claim at once, its attempts kept; a free job is untouched', async () => {
  const held = await add();
  const free = await add();
  await db
    .updateTable('jobs')
    .set({ run_after: sql`clock_timestamp() + interval '1 hour'` })
    .where('seq', '=', free.seq)
    .execute();
  const claimed = await claim(db, 'gone', 3_600_000);
  assert.equal(claimed?.seq, held.seq);
  await claimsNothing();

  await releaseAllLeases(db);
  const released = await rowOf(held.seq);
  assert.deepEqual(
    [released?.locked_by, released?.locked_until, released?.attempts],
    [null, null, 1],
    'released, and the attempt it used still counts',
  );
  assert.ok((await msUntil(free.seq, 'run_after')) > 3_500_000, 'a job not due stays not due');
  const again = await claim(db, 'w', 60_000);
  assert.equal(again?.seq, held.seq);
  assert.equal(again?.attempts, 2);
});

test('queuedJobs: per kind, the jobs no live lease holds (due or not) and the age of the oldest', async () => {
  assert.deepEqual(await queuedJobs(db), []);
  const old = await add({ kind: 'deploy' });
  await db
    .updateTable('jobs')
    .set({ created_at: sql`clock_timestamp() - interval '90 seconds'` })
    .where('seq', '=', old.seq)
    .execute();
  const later = await add({ kind: 'deploy' });
  await db
    .updateTable('jobs')
    .set({ run_after: sql`clock_timestamp() + interval '1 hour'` })
    .where('seq', '=', later.seq)
    .execute();
  await add({ kind: 'deliver_webhook' });
  const leased = await add({ kind: 'delete_service' });
  await db
    .updateTable('jobs')
    .set({ locked_by: 'w', locked_until: sql`clock_timestamp() + interval '1 minute'` })
    .where('seq', '=', leased.seq)
    .execute();
  const lapsed = await add({ kind: 'write_service_secrets' });
  await db
    .updateTable('jobs')
    .set({ locked_by: 'gone', locked_until: sql`clock_timestamp() - interval '1 second'` })
    .where('seq', '=', lapsed.seq)
    .execute();

  const byKind = new Map((await queuedJobs(db)).map((row) => [row.kind, row]));
  assert.deepEqual(
    [...byKind.keys()].toSorted(),
    ['deliver_webhook', 'deploy', 'write_service_secrets'],
    'a job under a live lease is not waiting; a lapsed one is',
  );
  assert.equal(byKind.get('deploy')?.count, 2, 'due or not');
  const age = byKind.get('deploy')?.oldestS ?? 0;
  assert.ok(age >= 90 && age < 120, `the oldest waits 90 s, got ${age}`);
  assert.equal(byKind.get('deliver_webhook')?.count, 1);
  assert.ok((byKind.get('deliver_webhook')?.oldestS ?? -1) < 30);
});

/** A worker over this store, not yet started, running `handler` for every kind, two slots. */
function workerOver(handler: JobHandler, pollMs: number): Worker {
  const handlers = Object.fromEntries(JOB_KINDS.map((kind) => [kind, handler])) as Record<
    JobKind,
    JobHandler
  >;
  return new Worker({
    store,
    handlers,
    logger: pino({ level: 'silent' }),
    leaseMs: 10_000,
    budgets: [{ kinds: JOB_KINDS, slots: 2, perAccount: 2 }],
    pollMs,
  });
}

/** Does nothing, for every kind. */
const idleHandler: JobHandler = { run: async () => undefined, fail: async () => undefined };

/** A started worker running `handler` for every kind, polling often. */
async function runWorker(handler: JobHandler): Promise<Worker> {
  const worker = workerOver(handler, 20);
  await worker.start();
  return worker;
}

test('the worker: a retryable error runs again until its attempts are used up, then fails; a terminal one fails at once', async () => {
  const flaky = await add({ maxAttempts: 3 });
  const terminal = await add();
  const runs = new Map<string, number>();
  const retrying: string[] = [];
  const failed = new Map<string, string>();
  const worker = await runWorker({
    async run(job) {
      runs.set(job.subject_id, (runs.get(job.subject_id) ?? 0) + 1);
      throw job.subject_id === terminal.subject_id
        ? new TerminalError('the image does not exist')
        : new Error(`attempt ${job.attempts} timed out`);
    },
    async fail(job, reason, jobClaim) {
      await db.transaction().execute(async (trx) => {
        failed.set(job.subject_id, reason);
        await jobClaim.finish(trx);
      });
    },
    async retrying(job, reason) {
      retrying.push(`${job.subject_id === flaky.subject_id ? 'flaky' : 'terminal'}: ${reason}`);
    },
    retryDelayMs: () => 0,
  });
  try {
    await pollUntil('both jobs to end', async () =>
      (await db.selectFrom('jobs').select('seq').executeTakeFirst()) ? undefined : true,
    );
  } finally {
    await worker.stop();
  }
  assert.equal(runs.get(flaky.subject_id), 3, 'run once per attempt');
  assert.deepEqual(retrying, ['flaky: attempt 1 timed out', 'flaky: attempt 2 timed out']);
  assert.equal(failed.get(flaky.subject_id), 'attempt 3 timed out');
  assert.equal(runs.get(terminal.subject_id), 1, 'a terminal error is not retried');
  assert.equal(failed.get(terminal.subject_id), 'the image does not exist');
});

test('the worker: a job claimed more times than it may run (its workers kept dying) fails without running', async () => {
  const abandoned = await add({ maxAttempts: 2 });
  // Two claims whose workers died: the third claim is past the job's attempts.
  await db
    .updateTable('jobs')
    .set({ attempts: 2, last_error: 'killed mid-run' })
    .where('seq', '=', abandoned.seq)
    .execute();
  let ran = 0;
  const failed: string[] = [];
  const worker = await runWorker({
    async run() {
      ran++;
    },
    async fail(_job, reason) {
      failed.push(reason);
    },
  });
  try {
    await pollUntil('the job to end', async () => ((await rowOf(abandoned.seq)) ? undefined : true));
  } finally {
    await worker.stop();
  }
  assert.equal(ran, 0, 'not run again');
  assert.deepEqual(failed, ['killed mid-run'], 'failed with the last error it had, and removed');
});

test('the worker: a job queued alone is claimed once; no loop claims again after it, nor beside it, when nothing else was due', async () => {
  const worker = workerOver(idleHandler, 3_600_000);
  const claims = () => queries.filter((q) => q.includes('UPDATE jobs SET locked_by')).length;
  const before = claims();
  await worker.start();
  try {
    // Each loop's first claim, finding nothing.
    await pollUntil('both loops to have looked', async () => (claims() - before >= 2 ? true : undefined));
    const from = claims();
    for (let i = 0; i < 3; i++) {
      const job = await add();
      await pollUntil('the job to end', async () => ((await rowOf(job.seq)) ? undefined : true));
    }
    // One claim per job; a notification heard while a job ends may add one. Before, each job cost
    // three: its own, the other loop's look beside it, and its loop's look after it.
    const made = claims() - from;
    assert.ok(made >= 3 && made <= 5, `${made} claims for 3 jobs`);
  } finally {
    await worker.stop();
  }
});

test('a stop while every loop is out claiming ends the loops at once, leaving no poll timer behind', async () => {
  for (let round = 0; round < 20; round++) {
    // An hour-long poll and a grace as long: a loop that went to sleep after the stop would hold both.
    const worker = workerOver(idleHandler, 3_600_000);
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await worker.start();
    let deadline: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      worker.stop(3_600_000).then(() => true),
      new Promise<false>((resolve) => {
        deadline = setTimeout(() => resolve(false), 10_000);
      }),
    ]);
    clearTimeout(deadline);
    assert.ok(stopped, `round ${round}: the stop waited on a sleeping loop`);
    const timersAfter = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    assert.ok(timersAfter <= timersBefore, `round ${round}: a timer outlived the stop`);
  }
});

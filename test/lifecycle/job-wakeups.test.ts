import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pino from 'pino';
import { type JobHandler, jobBudgets, Worker } from '../../src/jobs/worker.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { notify } from '../../src/store/notifications.ts';
import { enqueue, enqueueAtCommit, JOB_KINDS, type JobKind } from '../../src/store/repositories/jobs.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * How a worker's idle loops wake (jobs/idle-loops.ts), counted in claim statements: an idle worker
 * claims once per budget and poll, not once per slot; one notification still fills every slot of a
 * burst; a job queued alone costs one claim; a job of an account that uses its whole share wakes no
 * loop; a job queued without a notification is found by the poll; stop() ends every idle loop. On the
 * embedded database an idle worker polls once a minute, and still runs a job that comes due later (a
 * queued job's run_after, a retry's backoff) on time, though nothing announces it coming due.
 */
let database: TestDatabase;
let store: Store;
const statements: string[] = [];
const claims = () => statements.filter((q) => /^\s*UPDATE jobs SET locked_by/.test(q)).length;
before(async () => {
  database = await createTestDatabase();
  store = await openStore({
    databaseUrl: database.databaseUrl,
    dataDir: database.dataDir,
    onQuery: (q) => statements.push(q),
  });
});
after(async () => {
  await store.close();
  await database.drop();
});

const workers: { worker: Worker; running: Map<string, () => void> }[] = [];
afterEach(async () => {
  // Jobs a failed test left held would keep their lease renewals, and the test process, going: the
  // workers stop claiming first, then those jobs end.
  const stopping = workers.map(({ worker }) => worker.stop());
  for (const { running } of workers.splice(0)) for (const release of running.values()) release();
  await Promise.all(stopping);
  await store.db.deleteFrom('jobs').execute();
});

/** Two budgets of four slots, every job held until released; `pollMs` undefined: the store's default. */
function startWorker(pollMs: number | undefined, perAccount = 4) {
  statements.length = 0;
  const running = new Map<string, () => void>();
  let peak = 0;
  const handler: JobHandler = {
    run(job) {
      return new Promise<void>((resolve) => {
        running.set(job.seq, resolve);
        peak = Math.max(peak, running.size);
      }).finally(() => running.delete(job.seq));
    },
    async fail() {},
  };
  const worker = new Worker({
    store,
    handlers: Object.fromEntries(JOB_KINDS.map((kind) => [kind, handler])) as Record<JobKind, JobHandler>,
    logger: pino({ level: 'silent' }),
    leaseMs: 30_000,
    budgets: jobBudgets({ concurrency: 4, perAccount, webhookConcurrency: 4, webhookPerAccount: 4 }),
    pollMs,
  });
  workers.push({ worker, running });
  return { worker, running, peak: () => peak };
}
const SLOTS = 8;
const BUDGETS = 2;

const queued = async () =>
  Number(
    (
      await store.db
        .selectFrom('jobs')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

/** Lets every held job end, and those claimed after them, until none is queued. */
async function runEveryJob(running: Map<string, () => void>) {
  await pollUntil(
    'every job to run',
    async () => {
      for (const release of running.values()) release();
      return (await queued()) === 0 ? true : undefined;
    },
    { timeoutMs: 30_000 },
  );
}

test('an idle worker claims once per budget and poll, not once per slot', async () => {
  const pollMs = 25;
  const { worker } = startWorker(pollMs);
  const started = performance.now();
  await worker.start();
  // Each loop claims once as it starts; from then on only the pollers do.
  await pollUntil('the idle worker to claim 30 times', async () => (claims() >= 30 ? true : undefined));
  const elapsed = performance.now() - started;
  const count = claims();
  // A timer fires no sooner than asked (a loaded machine only makes it later), so in `elapsed` each
  // budget's poller claimed at most elapsed / pollMs + 1 times; every slot polling would claim 4x that.
  const bound = SLOTS + BUDGETS * (elapsed / pollMs + 2);
  assert.ok(count <= bound, `${count} claims in ${Math.round(elapsed)} ms, at most ${Math.round(bound)}`);
});

test('one notification fills every slot of a burst, and finished jobs make room for the rest', async () => {
  // A poll too slow to help: the notification and the loops' hand-on do it all.
  const { worker, running, peak } = startWorker(600_000);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  const accountId = randomUUID();
  // One transaction: its notifications are delivered as one.
  await store.db.transaction().execute(async (trx) => {
    for (let i = 0; i < 10; i++) await enqueue(trx, { kind: 'deploy', subjectId: randomUUID(), accountId });
    for (let i = 0; i < 10; i++)
      await enqueue(trx, { kind: 'deliver_webhook', subjectId: randomUUID(), accountId });
  });
  await pollUntil('every slot to run a job', async () => (running.size === SLOTS ? true : undefined));
  await runEveryJob(running);
  assert.equal(peak(), SLOTS);
});

test('a queued job wakes only the budget that runs it', async () => {
  const { worker, running } = startWorker(600_000);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  const ways = {
    enqueue: (db: Store['db'], job: Parameters<typeof enqueue>[1]) => enqueue(db, job),
    'enqueueAtCommit (the events statement notifies)': enqueueAtCommit,
  };
  for (const [way, queue] of Object.entries(ways)) {
    statements.length = 0;
    await store.db
      .transaction()
      .execute((trx) => queue(trx, { kind: 'deploy', subjectId: randomUUID(), accountId: randomUUID() }));
    await pollUntil('the job to run', async () => (running.size === 1 ? true : undefined));
    for (const release of running.values()) release();
    await pollUntil('the job to end', async () => ((await queued()) === 0 ? true : undefined));
    // The deploy loop's claim alone: nothing else was due, so it woke no other loop and did not look
    // again once the job was done; a delivery loop woken too would make a second.
    assert.equal(claims(), 1, way);
  }
});

test("a job of an account that uses its whole share wakes no loop; an earlier version's notification does", async () => {
  const { worker, running } = startWorker(600_000, 1);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  const full = { kind: 'deploy', accountId: randomUUID() } as const;
  await enqueue(store.db, { ...full, subjectId: randomUUID() });
  await pollUntil('its job to run', async () => (running.size === 1 ? true : undefined));
  statements.length = 0;
  // Its next jobs, each notified apart, both ways: none can be claimed here while the first runs, so
  // the idle loops are not woken to find nothing.
  for (let i = 0; i < 3; i++) {
    await enqueue(store.db, { ...full, subjectId: randomUUID() });
    await store.db.transaction().execute((trx) => enqueueAtCommit(trx, { ...full, subjectId: randomUUID() }));
  }
  // Another account's job, notified after them: the claim that takes it is the first since.
  await enqueue(store.db, { kind: 'deploy', subjectId: randomUUID(), accountId: randomUUID() });
  await pollUntil("the other account's job to run", async () => (running.size === 2 ? true : undefined));
  assert.equal(claims(), 1);
  // A process of the version before names no account: its notification wakes a loop, which looks.
  await notify(store.db, 'jobs', 'deploy');
  await pollUntil('a loop to claim', async () => (claims() === 2 ? true : undefined));
  // The full account's job ending claims its next, and so on: every job runs.
  await runEveryJob(running);
});

test('a job queued without a notification is found by the poll, and the rest of its burst after it', async () => {
  const { worker, running } = startWorker(50);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  const accountId = randomUUID();
  // Inserted as a lost notification leaves them: nothing wakes the worker.
  await store.db
    .insertInto('jobs')
    .values(
      Array.from({ length: 4 }, () => ({
        kind: 'deploy',
        subject_id: randomUUID(),
        account_id: accountId,
        max_attempts: 8,
      })),
    )
    .execute();
  await pollUntil('the poll to find every job', async () => (running.size === 4 ? true : undefined));
  for (const release of running.values()) release();
  await pollUntil('every job to run', async () => ((await queued()) === 0 ? true : undefined));
});

test('a retry coming due is claimed while the loop a notification woke runs a long job', async () => {
  const { worker, running } = startWorker(200);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  // The long job, queued with a notification, and a retry due shortly, which nothing announces.
  await enqueue(store.db, { kind: 'deploy', subjectId: randomUUID(), accountId: randomUUID() });
  await store.db
    .insertInto('jobs')
    .values({
      kind: 'deploy',
      subject_id: randomUUID(),
      account_id: randomUUID(),
      max_attempts: 8,
      attempts: 1,
      run_after: new Date(Date.now() + 300),
    })
    .execute();
  await pollUntil('the retry to run beside the long job', async () =>
    running.size === 2 ? true : undefined,
  );
  for (const release of running.values()) release();
});

test('stop() ends every idle loop at once, the poller and the others', { timeout: 60_000 }, async () => {
  // Loops woken only by their ten-minute poll would outlast the test's deadline.
  const { worker } = startWorker(600_000);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  assert.equal(worker.alive(), true);
  await worker.stop(600_000);
  assert.equal(worker.alive(), false);
});

test('an idle worker on the embedded database claims nothing for seconds (its poll is a minute)', async (ctx) => {
  if (store.kind !== 'embedded') {
    ctx.skip('Postgres polls every second: other processes queue jobs and hold leases');
    return;
  }
  const { worker } = startWorker(undefined);
  await worker.start();
  // Each loop claims once as it starts, then asks when the next job comes due (none).
  const due = () => statements.filter((q) => /min\(greatest\(run_after, locked_until\)\)/.test(q)).length;
  await pollUntil('every loop to be idle', async () =>
    claims() >= SLOTS && due() >= SLOTS ? true : undefined,
  );
  const before = statements.length;
  // A window, not a wait for something: a worker polling each second (as before) runs 2 claims a second.
  await sleep(3000);
  const during = statements.slice(before);
  assert.ok(during.length <= 1, `${during.length} statements in 3 s of idle: ${during.join('; ')}`);
});

/** A worker of the store's default poll whose handler fails the first attempt of `retried`'s job (retried after 1.5 s). */
function failingOnce(retried: string) {
  const attempts: { subject: string; attempt: number; at: number }[] = [];
  const handler: JobHandler = {
    async run(job) {
      attempts.push({ subject: job.subject_id, attempt: job.attempts, at: performance.now() });
      if (job.attempts === 1 && job.subject_id === retried) throw new Error('the first attempt fails');
    },
    async fail() {},
    retryDelayMs: () => 1500,
  };
  const worker = new Worker({
    store,
    handlers: Object.fromEntries(JOB_KINDS.map((kind) => [kind, handler])) as Record<JobKind, JobHandler>,
    logger: pino({ level: 'silent' }),
    leaseMs: 30_000,
    budgets: jobBudgets({ concurrency: 4, perAccount: 4, webhookConcurrency: 4, webhookPerAccount: 4 }),
  });
  workers.push({ worker, running: new Map() });
  return { worker, attempts };
}

test('a job due in 1.5 s and a retry backing off 1.5 s run on time, though nothing announces them coming due', async () => {
  statements.length = 0;
  const retried = randomUUID();
  const later = randomUUID();
  const { worker, attempts } = failingOnce(retried);
  const attempt = (subject: string, n: number) => async () =>
    attempts.find((a) => a.subject === subject && a.attempt === n);
  await worker.start();
  await pollUntil('every loop to be idle', async () => (claims() >= SLOTS ? true : undefined));
  // Queued as every job is (with its notification), due 1.5 s from now: the claim it wakes finds nothing.
  const queuedAt = performance.now();
  await store.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('jobs')
      .values({
        kind: 'deploy',
        subject_id: later,
        account_id: randomUUID(),
        max_attempts: 8,
        run_after: sql<Date>`clock_timestamp() + interval '1500 milliseconds'`,
      })
      .execute();
    await notify(trx, 'jobs', 'deploy');
  });
  // Queued to run now; its first attempt fails and it backs off 1.5 s.
  await enqueue(store.db, { kind: 'deploy', subjectId: retried, accountId: randomUUID() });
  // The deadlines: the job's time plus a loaded machine's margin, far below the embedded poll's minute.
  const ran = await pollUntil('the job due later to run', attempt(later, 1), { timeoutMs: 8000 });
  assert.ok(ran.at - queuedAt >= 1400, `ran ${Math.round(ran.at - queuedAt)} ms after it was queued`);
  const first = await pollUntil('the first attempt', attempt(retried, 1));
  const second = await pollUntil('the retry to run', attempt(retried, 2), { timeoutMs: 8000 });
  assert.ok(second.at - first.at >= 1400, `retried ${Math.round(second.at - first.at)} ms after it failed`);
  await pollUntil('every job to run', async () => ((await queued()) === 0 ? true : undefined));
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { type JobBudget, type JobHandler, jobBudgets, Worker } from '../../src/jobs/worker.ts';
import { enqueue, JOB_KINDS, type JobKind } from '../../src/store/repositories/jobs.ts';
import { type Harness, startHarness } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/**
 * Issue 24 item 1: a worker's slots are budgeted per job kind and per account. Jobs that never end on
 * their own (a receiver that trickles its answer) fill only their own budget's slots, and only their
 * account's share of them: the other kind and the other accounts still run.
 */
let h: Harness;
before(async () => {
  h = await startHarness();
});
after(() => h.close());

const budgets: JobBudget[] = jobBudgets({
  concurrency: 3,
  perAccount: 2,
  webhookConcurrency: 2,
  webhookPerAccount: 1,
});

test('deliveries run in slots of their own, and one account takes at most its share of each budget', async () => {
  const slow = randomUUID();
  const other = randomUUID();
  const running = new Map<string, { kind: string; account: string; release: () => void }>();
  /** The most jobs of one budget and account ever running at once, by `budget/account`. */
  const peak = new Map<string, number>();
  const budgetOf = (kind: string) => (kind === 'deliver_webhook' ? 'deliveries' : 'other');
  const handler: JobHandler = {
    run(job) {
      return new Promise<void>((resolve) => {
        running.set(job.seq, { kind: job.kind, account: job.account_id ?? '', release: resolve });
        const key = `${budgetOf(job.kind)}/${job.account_id}`;
        const now = [...running.values()].filter((r) => `${budgetOf(r.kind)}/${r.account}` === key).length;
        peak.set(key, Math.max(peak.get(key) ?? 0, now));
      }).finally(() => running.delete(job.seq));
    },
    async fail() {},
  };
  const handlers = Object.fromEntries(JOB_KINDS.map((kind) => [kind, handler])) as Record<
    JobKind,
    JobHandler
  >;

  // The slow account's jobs come first: without budgets they would take every slot.
  const add = (kind: JobKind, accountId: string, count: number) =>
    Promise.all(
      Array.from({ length: count }, () =>
        enqueue(h.deps.store.db, { kind, subjectId: randomUUID(), accountId }),
      ),
    );
  await add('deliver_webhook', slow, 6);
  await add('deploy', slow, 4);
  await add('deliver_webhook', other, 1);
  await add('deploy', other, 1);

  const worker = new Worker({
    store: h.deps.store,
    handlers,
    logger: pino({ level: 'silent' }),
    leaseMs: 10_000,
    budgets,
    pollMs: 50,
  });
  await worker.start();
  try {
    const shape = () =>
      [...running.values()].map((r) => `${budgetOf(r.kind)}/${r.account === slow ? 'slow' : 'other'}`).sort();
    await pollUntil('each budget to run its share of each account', async () =>
      running.size === 5 ? true : undefined,
    );
    assert.deepEqual(shape(), [
      'deliveries/other',
      'deliveries/slow',
      'other/other',
      'other/slow',
      'other/slow',
    ]);
    // Everything drains, one release at a time, without any budget ever going over.
    await pollUntil(
      'every job to run',
      async () => {
        for (const r of running.values()) r.release();
        const left = await h.deps.store.db
          .selectFrom('jobs')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .executeTakeFirstOrThrow();
        return Number(left.n) === 0 ? true : undefined;
      },
      { timeoutMs: 30_000 },
    );
    assert.deepEqual(Object.fromEntries(peak), {
      [`deliveries/${slow}`]: 1,
      [`deliveries/${other}`]: 1,
      [`other/${slow}`]: 2,
      [`other/${other}`]: 1,
    });
  } finally {
    await worker.stop();
  }
});

test('the budgets come from the settings: defaults, overrides, a share never above its slots, 0 refused', () => {
  const fromEnv = (env: NodeJS.ProcessEnv, concurrency = 8) => {
    const config = loadConfig(env);
    return jobBudgets({
      concurrency,
      perAccount: config.jobConcurrencyPerAccount,
      webhookConcurrency: config.webhookConcurrency,
      webhookPerAccount: config.webhookConcurrencyPerAccount,
    }).map(({ kinds, slots, perAccount }) => ({
      deliveries: kinds.includes('deliver_webhook'),
      slots,
      perAccount,
    }));
  };
  assert.deepEqual(fromEnv({}), [
    { deliveries: false, slots: 8, perAccount: 6 },
    { deliveries: true, slots: 4, perAccount: 2 },
  ]);
  assert.deepEqual(
    fromEnv(
      {
        BERTH_JOB_CONCURRENCY_PER_ACCOUNT: '10',
        BERTH_WEBHOOK_CONCURRENCY: '6',
        BERTH_WEBHOOK_CONCURRENCY_PER_ACCOUNT: '3',
      },
      4,
    ),
    [
      { deliveries: false, slots: 4, perAccount: 4 },
      { deliveries: true, slots: 6, perAccount: 3 },
    ],
  );
  assert.throws(
    () => loadConfig({ BERTH_WEBHOOK_CONCURRENCY: '0' }),
    /BERTH_WEBHOOK_CONCURRENCY must be a whole number from 1 to 10000, got "0"/,
  );
});

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Db, Store } from '../store/database.ts';
import { JOB_ACCOUNT_PREFIX } from '../store/notifications.ts';
import {
  type ClaimedJob,
  type ClaimFilter,
  claim,
  complete,
  type Fence,
  holdClaim,
  JOB_KINDS,
  type JobKind,
  nextDueInMs,
  renewLease,
  retryLater,
} from '../store/repositories/jobs.ts';
import type { JobRow } from '../store/schema.ts';
import { TerminalError } from './errors.ts';
import { IdleLoops } from './idle-loops.ts';

/**
 * What a handler is given to tie its writes to the claim it runs under. Every transaction that records
 * an outcome on the job's subject (a final state, or a move the next attempt would take as work done,
 * like a deployment's start) calls `hold` or `finish` last, before it commits: an attempt that lost the
 * job to another worker (a long pause) has its write rolled back, so the attempt that holds the job never
 * finds a subject moved by one that no longer does (it would take that work as done and end the job).
 * Moves every attempt re-enters (a delete's `deleting`) need not.
 */
export interface JobClaim {
  /** Throws LostClaimError when another worker holds the job now; else keeps it this claim's until the commit. */
  hold(trx: Db): Promise<void>;
  /** `hold`, and removes the job in the same transaction: the outcome and the job's end commit together. */
  finish(trx: Db): Promise<void>;
  /**
   * For a statement of the handler's own that holds or removes the job as it writes (one statement
   * instead of two): the claim's fence, absent for a claim nothing can take (a test's, which runs a
   * handler by hand); `settled` is then told what the statement found.
   */
  readonly fence?: Fence;
  /** Throws LostClaimError when the statement fenced by `fence` found the job another worker's; `removed`: it removed it. */
  settled(held: boolean, removed: boolean): void;
}

/**
 * What a job kind does. `run` must be idempotent; `fail` records a final failure on the subject.
 * `signal` aborts when this worker loses the job's lease: another worker owns it from then on, so the
 * handler must not record an outcome. A handler that returns without calling `finish` has its job
 * removed then (fenced by the claim): it returns only once this attempt did the work, or when there is
 * none (the subject is gone or already final).
 */
export interface JobHandler {
  run(job: JobRow, signal: AbortSignal, claim: JobClaim): Promise<void>;
  fail(job: JobRow, reason: string, claim: JobClaim): Promise<void>;
  /** Shows a failed attempt that will be retried on the subject, so nobody waits on a silent retry. */
  retrying?(job: JobRow, reason: string): Promise<void>;
  /** How long after a failed attempt the job runs again; the queue's backoff when absent. */
  retryDelayMs?(attempts: number): number;
}

export type JobHandlers = Record<JobKind, JobHandler>;

/**
 * A share of a process's job slots: jobs of `kinds` run in `slots` of their own, at most `perAccount` of
 * one account at once, so one account's slow work (a receiver that answers slowly, long rollouts) never
 * holds the slots another account's jobs need, and deliveries never hold the slots deployments need.
 */
export interface JobBudget {
  kinds: readonly JobKind[];
  slots: number;
  perAccount: number;
}

/** `berth serve`'s slots for jobs other than deliveries (`berth worker --concurrency` sets its own). */
export const DEFAULT_CONCURRENCY = 8;

export interface BudgetSettings {
  /** Slots for every job but webhook deliveries. */
  concurrency: number;
  perAccount: number;
  /** Slots for webhook deliveries, apart from the others. */
  webhookConcurrency: number;
  webhookPerAccount: number;
}

/** Webhook deliveries in slots of their own; every other kind shares the rest. */
export function jobBudgets(settings: BudgetSettings): JobBudget[] {
  return [
    {
      kinds: JOB_KINDS.filter((kind) => kind !== 'deliver_webhook'),
      slots: settings.concurrency,
      perAccount: Math.min(settings.perAccount, settings.concurrency),
    },
    {
      kinds: ['deliver_webhook'],
      slots: settings.webhookConcurrency,
      perAccount: Math.min(settings.webhookPerAccount, settings.webhookConcurrency),
    },
  ];
}

/** The claim was lost before the outcome committed: the outcome is another worker's to record. */
export class LostClaimError extends Error {}

/** The JobClaim of one claim (`fence`); `finished` once `finish` removed the job. */
export function fencedClaim(fence: Fence): JobClaim & { readonly finished: boolean } {
  let finished = false;
  const settled = (held: boolean, removed: boolean) => {
    if (!held) throw new LostClaimError('another worker holds this job now');
    if (removed) finished = true;
  };
  return {
    fence,
    get finished() {
      return finished;
    },
    async hold(trx) {
      settled(await holdClaim(trx, fence), false);
    },
    async finish(trx) {
      settled(await complete(trx, fence), true);
    },
    settled,
  };
}

export interface WorkerOptions {
  store: Store;
  handlers: JobHandlers;
  logger: Logger;
  leaseMs: number;
  /** This process's slots; jobs of one service never run together whatever they are. */
  budgets: JobBudget[];
  /**
   * Fallback poll when no notification arrives (a notification lost with a dropped connection, a job of
   * another process's coming due): `POSTGRES_POLL_MS`, or `EMBEDDED_POLL_MS` on the embedded database.
   */
  pollMs?: number;
}

/** Postgres: other processes queue jobs and may die holding them, and a LISTEN connection can drop. */
export const POSTGRES_POLL_MS = 1000;

/**
 * The embedded database has one process, which hears every job queued in it at once (its
 * notifications never leave the process), so its idle loops poll only as a last resort: a claim that
 * finds nothing asks when the next job comes due (a retry's backoff, a lease lapsing) and the budget's
 * poll comes then (`IdleLoops.dueIn`). An idle server claimed twice a second before, 7 ms of CPU a second
 * (docs/performance.md, "An idle embedded server").
 */
export const EMBEDDED_POLL_MS = 60_000;

/** The jobs one budget runs now, by account; claims are taken one at a time so a count is never stale. */
class BudgetSlots {
  private readonly running = new Map<string, number>();
  private claiming: Promise<unknown> = Promise.resolve();
  readonly budget: JobBudget;
  readonly idle = new IdleLoops();
  /** Notifications heard for this budget's kinds so far: one heard during a job may be for its queue's next. */
  heard = 0;

  constructor(budget: JobBudget) {
    this.budget = budget;
  }

  claim(take: (filter: ClaimFilter) => Promise<ClaimedJob | undefined>): Promise<ClaimedJob | undefined> {
    const next = this.claiming.then(async () => {
      const fullAccounts = [...this.running]
        .filter(([, count]) => count >= this.budget.perAccount)
        .map(([account]) => account);
      const job = await take({ kinds: this.budget.kinds, fullAccounts });
      if (job?.account_id) this.running.set(job.account_id, (this.running.get(job.account_id) ?? 0) + 1);
      return job;
    });
    this.claiming = next.catch(() => undefined);
    return next;
  }

  /** Whether `account` uses its whole budget of these slots: its other jobs wait for one to end. */
  full(account: string | null): boolean {
    return account !== null && (this.running.get(account) ?? 0) >= this.budget.perAccount;
  }

  release(job: JobRow): void {
    if (!job.account_id) return;
    const count = (this.running.get(job.account_id) ?? 1) - 1;
    if (count > 0) this.running.set(job.account_id, count);
    else this.running.delete(job.account_id);
  }
}

export class Worker {
  readonly id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private running = false;
  private loops: Promise<void>[] = [];
  /** Loops still going: one that ended (stopped, or died of an error) no longer claims jobs. */
  private live = 0;
  private unlisten: (() => void) | undefined;
  private readonly budgets: BudgetSlots[];
  private readonly pollMs: number;
  /** Whether a claim that finds nothing asks when the next job comes due (the embedded database's long poll). */
  private readonly wakeForDue: boolean;

  private readonly options: WorkerOptions;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.budgets = options.budgets.map((budget) => new BudgetSlots(budget));
    const embedded = options.store.kind === 'embedded';
    this.pollMs = options.pollMs ?? (embedded ? EMBEDDED_POLL_MS : POSTGRES_POLL_MS);
    // A poll of a second or less finds a job that came due soon enough without being told when.
    this.wakeForDue = embedded && this.pollMs > POSTGRES_POLL_MS;
  }

  async start(): Promise<void> {
    this.running = true;
    this.unlisten = this.options.store.notifications.subscribe('jobs', {
      notified: (keys) => {
        // The kinds queued and their accounts: an empty notification (a trigger's) may be any kind, one
        // naming no account (an earlier version's) any account.
        const kinds: string[] = [];
        const accounts: string[] = [];
        for (const key of keys) {
          if (key.startsWith(JOB_ACCOUNT_PREFIX)) accounts.push(key.slice(JOB_ACCOUNT_PREFIX.length));
          else if (key !== '') kinds.push(key);
        }
        for (const slots of this.budgets) {
          if (kinds.length > 0 && !kinds.some((kind) => slots.budget.kinds.includes(kind as JobKind)))
            continue;
          slots.heard++;
          // Jobs only of accounts that use their whole share here: a claim would pass them over and find
          // nothing. The first of those accounts' jobs here to end claims again (its account was full),
          // and a loop whose job ends after this claims again too (`heard`: its queue's next).
          if (accounts.length > 0 && accounts.every((account) => slots.full(account))) continue;
          slots.idle.notified();
        }
      },
    });
    await this.options.store.notifications.start();
    for (const slots of this.budgets) {
      for (let i = 0; i < slots.budget.slots; i++) {
        this.live++;
        this.loops.push(this.loop(slots).finally(() => this.live--));
      }
    }
  }

  /** Started, not stopped, and every loop still claiming: what /ready asks of a process's workers. */
  alive(): boolean {
    return this.running && this.live === this.loops.length;
  }

  /** Stops claiming and waits for the jobs in hand; an unfinished job's lease lets another worker take it. */
  async stop(graceMs = 10_000): Promise<void> {
    this.running = false;
    this.wakeAll();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.all(this.loops), grace]);
    clearTimeout(timer);
    this.loops = [];
    this.unlisten?.();
  }

  private wakeAll(): void {
    for (const slots of this.budgets) slots.idle.wakeAll();
  }

  private async loop(slots: BudgetSlots): Promise<void> {
    const { store, logger, leaseMs } = this.options;
    while (this.running) {
      let job: ClaimedJob | undefined;
      // The database starts the lease after this moment: it is surely held until claimedAt + leaseMs.
      const claimedAt = Date.now();
      try {
        job = await slots.claim((filter) => claim(store.db, this.id, leaseMs, filter));
      } catch (error) {
        if (!this.running) return;
        logger.error({ err: error }, 'claiming a job failed');
      }
      if (!job) {
        if (this.wakeForDue && this.running) await this.learnNextDue(slots, claimedAt);
        // A stop that came while this claim was out found no sleeper to wake: one must not start now.
        if (this.running) await slots.idle.wait(this.pollMs);
        continue;
      }
      // More jobs another loop could take are due: the next idle loop of this budget looks while this
      // one works (none when the only ones due are of this job's account, which it has just filled).
      if (slots.full(job.account_id) ? job.others_due_elsewhere : job.others_due) slots.idle.wakeOne();
      const heard = slots.heard;
      let removed = false;
      let filled = false;
      try {
        removed = await this.execute(job, claimedAt);
      } finally {
        filled = slots.full(job.account_id);
        slots.release(job);
      }
      // A slot of this job's account is free, and the next job of its queue due: this loop's own next
      // claim looks for them (a queue's jobs are all of one budget: deliveries have no queue key), when
      // there can be any: one was due at the claim, or one was queued since (its notification), or the
      // account had no slot left (its jobs were passed over), or this job is not gone (a retry).
      // Otherwise the claim would find nothing: the loop waits instead (a notification, or the poll,
      // wakes it), which spares an idle queue a claim per job.
      // A job back in the queue (a retry, a lost lease) comes due later: the budget's poll must know when.
      if (!removed) slots.idle.dueKnown = false;
      if (removed && !job.others_due && !filled && slots.heard === heard && this.running) {
        // The poll that took this job (or a job retried since) may have left the next time unknown.
        // Jobs that came due since this job's claim (which saw none other due) count as due now.
        if (this.wakeForDue && !slots.idle.dueKnown) await this.learnNextDue(slots, claimedAt);
        if (this.running) await slots.idle.wait(this.pollMs);
      }
    }
  }

  /** Tells the budget's idle loops when its next job comes due, so that its poll comes then. */
  private async learnNextDue(slots: BudgetSlots, since: number): Promise<void> {
    try {
      slots.idle.dueIn(await nextDueInMs(this.options.store.db, slots.budget.kinds, new Date(since)));
    } catch (error) {
      if (!this.running) return;
      // Not knowing when the next job comes due, the budget looks again soon.
      this.options.logger.error({ err: error }, 'reading when the next job comes due failed');
      slots.idle.dueIn(POSTGRES_POLL_MS);
    }
  }

  /** Runs a claimed job; true when it ended done, the job removed. */
  private async execute(job: JobRow, claimedAt: number): Promise<boolean> {
    const { store, logger, leaseMs, handlers } = this.options;
    const log = logger.child({
      job: job.seq,
      kind: job.kind,
      subject: job.subject_id,
      attempt: job.attempts,
    });
    // The claim this worker holds: every write about the job below is fenced by it, so a worker that
    // lost its lease (a long pause) cannot finish, release or fail a job another worker took over.
    const fence = { seq: job.seq, workerId: this.id, attempts: job.attempts };
    const lease = new AbortController();
    const stop = (why: string) => {
      if (lease.signal.aborted) return;
      log.warn(`${why}: another worker may run it; its outcome is not recorded here`);
      lease.abort(new Error('the lease of this job was lost'));
    };
    // The lease is known held only until the last renewal that succeeded was sent, plus leaseMs. A
    // renewal that is late (a stalled event loop, a pool with no free connection) must not leave the
    // handler running past that: it is stopped a margin before, so it makes no side effect after another
    // worker could have claimed the job. The providers' generation fence covers what is already under way.
    const margin = Math.floor(leaseMs / 5);
    let expiry: NodeJS.Timeout | undefined;
    const heldUntil = (from: number) => {
      clearTimeout(expiry);
      expiry = setTimeout(
        () => stop('could not renew the lease of this job in time'),
        Math.max(0, from + leaseMs - margin - Date.now()),
      );
    };
    heldUntil(claimedAt);
    const heartbeat = setInterval(
      () => {
        const sentAt = Date.now();
        renewLease(store.db, fence, leaseMs).then(
          (held) => {
            if (!held) stop('lost the lease of this job');
            else if (!lease.signal.aborted) heldUntil(sentAt);
          },
          (err) => log.warn({ err }, 'lease renewal failed'),
        );
      },
      Math.max(250, Math.floor(leaseMs / 3)),
    );
    const handler = handlers[job.kind as JobKind];
    const claimed = fencedClaim(fence);
    try {
      // A job that was claimed more times than it may run (its workers kept dying) fails for good.
      if (job.attempts > job.max_attempts) {
        log.error('job abandoned after too many attempts');
        await handler.fail(job, job.last_error ?? 'its worker stopped every time', claimed);
        if (!claimed.finished) await complete(store.db, fence);
        return false;
      }
      await handler.run(job, lease.signal, claimed);
      // The outcome committed with the job's removal: nothing is left to do.
      if (claimed.finished) {
        log.debug('job done');
        return true;
      }
      // A handler that was stopped did not finish: the job runs again, here or elsewhere.
      lease.signal.throwIfAborted();
      if (await complete(store.db, fence)) {
        log.debug('job done');
        return true;
      }
      log.warn('finished a job another worker holds now: its outcome is theirs');
      return false;
    } catch (error) {
      if (error instanceof LostClaimError) {
        log.warn('finished a job another worker holds now: its outcome is theirs');
        return false;
      }
      const message = error instanceof Error ? error.message : String(error);
      const retryable = !(error instanceof TerminalError);
      try {
        if (retryable && job.attempts < job.max_attempts) {
          log.warn({ err: error }, 'job failed; it will be retried');
          await retryLater(store.db, fence, message, handler.retryDelayMs?.(job.attempts));
          // A worker that may have lost the job leaves the subject to the one that holds it.
          if (!lease.signal.aborted) await handler.retrying?.(job, message);
        } else if (await renewLease(store.db, fence, leaseMs)) {
          // Recorded first, removed second: a crash in between runs fail again, which is idempotent.
          log.error({ err: error }, 'job failed for good');
          await handler.fail(job, message, claimed);
          if (!claimed.finished) await complete(store.db, fence);
        } else {
          log.warn({ err: error }, 'job failed, but another worker holds it now: its outcome is theirs');
        }
      } catch (inner) {
        if (inner instanceof LostClaimError) {
          log.warn({ err: error }, 'job failed, but another worker holds it now: its outcome is theirs');
          return false;
        }
        // The lease will lapse and the job run again: handlers are idempotent.
        log.error({ err: inner }, 'recording a job failure failed');
      }
      return false;
    } finally {
      clearInterval(heartbeat);
      clearTimeout(expiry);
    }
  }
}

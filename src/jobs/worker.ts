import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Db, Store } from '../store/database.ts';
import { claim, complete, type JobKind, renewLease, retryLater } from '../store/repositories/jobs.ts';
import type { JobRow } from '../store/schema.ts';
import { TerminalError } from './errors.ts';

/**
 * What a job kind does. `run` must be idempotent; `fail` records a final failure on the subject.
 * `signal` aborts when this worker loses the job's lease: another worker owns it from then on, so the
 * handler must not record an outcome.
 */
export interface JobHandler {
  /**
   * `finish`, called inside the transaction that records the outcome, removes the job in that same
   * transaction (one commit for both), fenced by this claim: it throws LostClaimError when another
   * worker holds the job now, so the outcome is rolled back with it. A handler that does not call it
   * has its job removed after it returns.
   */
  run(job: JobRow, signal: AbortSignal, finish?: (trx: Db) => Promise<void>): Promise<void>;
  fail(job: JobRow, reason: string): Promise<void>;
  /** Shows a failed attempt that will be retried on the subject, so nobody waits on a silent retry. */
  retrying?(job: JobRow, reason: string): Promise<void>;
  /** How long after a failed attempt the job runs again; the queue's backoff when absent. */
  retryDelayMs?(attempts: number): number;
}

export type JobHandlers = Record<JobKind, JobHandler>;

export const DEFAULT_CONCURRENCY = 8;

/** The claim was lost before the outcome committed: the outcome is another worker's to record. */
export class LostClaimError extends Error {}

export interface WorkerOptions {
  store: Store;
  handlers: JobHandlers;
  logger: Logger;
  leaseMs: number;
  /** Jobs run at once by this process; jobs of one service never run together whatever this is. */
  concurrency?: number;
  /** Fallback poll when no notification arrives (a notification lost with a dropped connection). */
  pollMs?: number;
}

export class Worker {
  readonly id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private running = false;
  private loops: Promise<void>[] = [];
  private waiters = new Set<() => void>();
  private unlisten: (() => void) | undefined;
  private readonly concurrency: number;
  private readonly pollMs: number;

  private readonly options: WorkerOptions;

  constructor(options: WorkerOptions) {
    this.options = options;
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.pollMs = options.pollMs ?? 1000;
  }

  async start(): Promise<void> {
    this.running = true;
    this.unlisten = this.options.store.notifications.subscribe('jobs', { notified: () => this.wakeAll() });
    await this.options.store.notifications.start();
    for (let i = 0; i < this.concurrency; i++) this.loops.push(this.loop());
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
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
    });
  }

  private async loop(): Promise<void> {
    const { store, logger, leaseMs } = this.options;
    while (this.running) {
      let job: JobRow | undefined;
      // The database starts the lease after this moment: it is surely held until claimedAt + leaseMs.
      const claimedAt = Date.now();
      try {
        job = await claim(store.db, this.id, leaseMs);
      } catch (error) {
        if (!this.running) return;
        logger.error({ err: error }, 'claiming a job failed');
      }
      if (!job) {
        await this.sleep(this.pollMs);
        continue;
      }
      // Another loop may find work too: a claimed job often makes the next one in its queue due later.
      this.wakeAll();
      await this.execute(job, claimedAt);
    }
  }

  private async execute(job: JobRow, claimedAt: number): Promise<void> {
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
    try {
      // A job that was claimed more times than it may run (its workers kept dying) fails for good.
      if (job.attempts > job.max_attempts) {
        log.error('job abandoned after too many attempts');
        await handler.fail(job, job.last_error ?? 'its worker stopped every time');
        await complete(store.db, fence);
        return;
      }
      let finished = false;
      await handler.run(job, lease.signal, async (trx) => {
        if (!(await complete(trx, fence))) throw new LostClaimError('another worker holds this job now');
        finished = true;
      });
      // The outcome committed with the job's removal: nothing is left to do.
      if (finished) {
        log.debug('job done');
        return;
      }
      // A handler that was stopped did not finish: the job runs again, here or elsewhere.
      lease.signal.throwIfAborted();
      if (await complete(store.db, fence)) log.debug('job done');
      else log.warn('finished a job another worker holds now: its outcome is theirs');
    } catch (error) {
      if (error instanceof LostClaimError) {
        log.warn('finished a job another worker holds now: its outcome is theirs');
        return;
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
          await handler.fail(job, message);
          await complete(store.db, fence);
        } else {
          log.warn({ err: error }, 'job failed, but another worker holds it now: its outcome is theirs');
        }
      } catch (inner) {
        // The lease will lapse and the job run again: handlers are idempotent.
        log.error({ err: inner }, 'recording a job failure failed');
      }
    } finally {
      clearInterval(heartbeat);
      clearTimeout(expiry);
    }
  }
}

/**
 * The loops of one budget that found no work. Their claims run one at a time anyway, so they are woken
 * one at a time: a notification wakes one, and a loop that claims a job wakes the next (more may be
 * due), a chain that ends at the loop that finds none. Only one of them polls on a timer, for work no
 * notification announces (a retry coming due, a notification lost with its connection): an idle process
 * claims once per budget and poll, not once per slot. A poll comes sooner when a job is known to come due
 * sooner (`dueIn`: a retry's backoff, a lapsing lease).
 */
export class IdleLoops {
  private readonly sleepers: (() => void)[] = [];
  /** The sleeper the poll timer wakes, while one sleeps. */
  private poller: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** When the poll timer fires (performance.now()), while it is set. */
  private timerAt = Number.POSITIVE_INFINITY;
  /** When the first job known to wait on a time comes due (performance.now()): the poll comes no later. */
  private dueAt = Number.POSITIVE_INFINITY;
  /**
   * Whether `dueAt` is up to date: false once the time it held passed (the poll took what came due, and
   * may have left later ones) or a job went back to the queue (a retry, a lost lease) since it was told.
   */
  dueKnown = false;
  /** A notification came while no loop slept: a loop whose claim started before it must look again. */
  private missed = false;

  /** Waits until woken; the first loop to wait while none polls also wakes itself after `pollMs`. */
  wait(pollMs: number): Promise<void> {
    if (this.missed) {
      this.missed = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        const at = this.sleepers.indexOf(done);
        if (at >= 0) this.sleepers.splice(at, 1);
        if (this.poller === done) this.handOnPoll();
        resolve();
      };
      this.sleepers.push(done);
      if (!this.poller) {
        this.poller = done;
        this.arm(Math.min(performance.now() + pollMs, this.dueAt));
      }
    });
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.polled(), Math.max(0, at - performance.now()));
  }

  /**
   * A job of the budget comes due in `ms` (undefined: none waits on a time, as far as the caller saw):
   * the poll comes by then, the sleeping poller's timer brought forward if need be. The earliest time
   * told is kept until it passes: a later answer that misses it costs at most one poll that finds nothing.
   */
  dueIn(ms: number | undefined): void {
    this.dueKnown = true;
    if (ms === undefined) return;
    const at = performance.now() + ms;
    if (at >= this.dueAt) return;
    this.dueAt = at;
    if (this.poller && at < this.timerAt) this.arm(at);
  }

  /**
   * The poll's own claim: the loop it wakes keeps no timer, as it polls again if it finds nothing, and
   * wakes the next (which then polls) if it takes a job.
   */
  private polled(): void {
    const poller = this.poller;
    // The timer was set for the due time (at the latest): the poll's claim looks for what came due, and
    // the next time is for a claim that finds nothing to tell.
    if (this.dueAt <= this.timerAt) {
      this.dueAt = Number.POSITIVE_INFINITY;
      this.dueKnown = false;
    }
    this.poller = undefined;
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    poller?.();
  }

  /**
   * The poller woke for something else (a notification, a hand-on) and may take a long job: the next
   * sleeper takes over the poll and its timer (the poll keeps its pace), so a retry coming due is not
   * left until that job ends.
   */
  private handOnPoll(): void {
    this.poller = this.sleepers[0];
    if (this.poller) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  /** Wakes one waiting loop, if any: one that claimed a job hands the search on. */
  wakeOne(): boolean {
    const wake = this.sleepers[0];
    wake?.();
    return wake !== undefined;
  }

  /** A job was queued: one loop looks for it, or, with none waiting, the next that would wait. */
  notified(): void {
    if (!this.wakeOne()) this.missed = true;
  }

  wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}

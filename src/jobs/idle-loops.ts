/**
 * The loops of one budget that found no work. Their claims run one at a time anyway, so they are woken
 * one at a time: a notification wakes one, and a loop that claims a job wakes the next (more may be
 * due), a chain that ends at the loop that finds none. Only one of them polls on a timer, for work no
 * notification announces (a retry coming due, a notification lost with its connection): an idle process
 * claims once per budget and poll, not once per slot.
 */
export class IdleLoops {
  private readonly sleepers: (() => void)[] = [];
  /** The sleeper the poll timer wakes, while one sleeps. */
  private poller: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
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
        this.timer = setTimeout(() => this.polled(), pollMs);
      }
    });
  }

  /**
   * The poll's own claim: the loop it wakes keeps no timer, as it polls again if it finds nothing, and
   * wakes the next (which then polls) if it takes a job.
   */
  private polled(): void {
    const poller = this.poller;
    this.poller = undefined;
    this.timer = undefined;
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

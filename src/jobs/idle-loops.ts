/**
 * The loops of one budget that found no work. Their claims run one at a time anyway, so they are woken
 * one at a time: a notification wakes one, and a loop that claims a job wakes the next (more may be
 * due), a chain that ends at the loop that finds none. Only one of them polls on a timer, for work no
 * notification announces (a retry coming due, a notification lost with its connection): an idle process
 * claims once per budget and poll, not once per slot.
 */
export class IdleLoops {
  private readonly sleepers: (() => void)[] = [];
  private polling = false;
  /** A notification came while no loop slept: a loop whose claim started before it must look again. */
  private missed = false;

  /** Waits until woken; the first loop to wait while none polls also wakes itself after `pollMs`. */
  wait(pollMs: number): Promise<void> {
    if (this.missed) {
      this.missed = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const poller = !this.polling;
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        if (poller) this.polling = false;
        const at = this.sleepers.indexOf(done);
        if (at >= 0) this.sleepers.splice(at, 1);
        resolve();
      };
      if (poller) {
        this.polling = true;
        timer = setTimeout(done, pollMs);
      }
      this.sleepers.push(done);
    });
  }

  /** Wakes one waiting loop, if any: one that claimed a job hands the search on. */
  wakeOne(): boolean {
    const wake = this.sleepers.shift();
    wake?.();
    return wake !== undefined;
  }

  /** A job was queued: one loop looks for it, or, with none waiting, the next that would wait. */
  notified(): void {
    if (!this.wakeOne()) this.missed = true;
  }

  wakeAll(): void {
    for (const wake of this.sleepers.splice(0)) wake();
  }
}

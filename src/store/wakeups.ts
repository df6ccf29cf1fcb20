import type { Store } from './database.ts';

/**
 * One LISTEN per channel per process, fanned out to any number of waiters by the NOTIFY payload (a
 * deployment id, an account id): a thousand followers cost one connection, not a thousand. A waiter
 * is armed before the read it follows, so a NOTIFY that arrives between the read and the wait is not
 * lost; a timeout bounds every wait, so a lost LISTEN connection costs only promptness.
 */
export class Wakeups {
  private readonly store: Store;
  private readonly channel: string;
  private readonly waiters = new Map<string, Set<() => void>>();
  private listening: Promise<() => Promise<void>> | undefined;

  constructor(store: Store, channel: string) {
    this.store = store;
    this.channel = channel;
  }

  private deliver(key: string): void {
    const set = this.waiters.get(key);
    if (!set) return;
    this.waiters.delete(key);
    for (const wake of set) wake();
  }

  /**
   * Arms a wait for `key` once LISTEN is in place: `woken` resolves at the next NOTIFY with that
   * payload, after `timeoutMs`, or when `signal` aborts, whichever comes first. It comes wrapped:
   * an async function that returned the bare promise would be awaited to its end, not to its arming.
   */
  async arm(key: string, timeoutMs: number, signal: AbortSignal): Promise<{ woken: Promise<void> }> {
    this.listening ??= this.store.listen(this.channel, (payload) => this.deliver(payload));
    await this.listening;
    const woken = new Promise<void>((resolve) => {
      let set = this.waiters.get(key);
      if (!set) {
        set = new Set();
        this.waiters.set(key, set);
      }
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.get(key)?.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal.addEventListener('abort', done, { once: true });
      set.add(done);
    });
    return { woken };
  }

  async close(): Promise<void> {
    const listening = this.listening;
    this.listening = undefined;
    if (listening) await (await listening)();
    for (const key of [...this.waiters.keys()]) this.deliver(key);
  }
}

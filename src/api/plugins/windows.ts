/**
 * Fixed-window counters for the rate limits: every counted request gets its own place in its key's
 * window (1, 2, 3...); a place past the limit is refused. Places are handed out without a promise when
 * they are at hand, since a counter runs on every request.
 * @module
 */
import type { Db } from '../../store/database.ts';
import { countInWindow } from '../../store/repositories/rate-limits.ts';

export interface Place {
  /** This request's place in the window, from 1. */
  position: number;
  /** When the window ends (this process's clock, ms). */
  resetAt: number;
}

export interface Windows {
  take(key: string): Place | Promise<Place>;
  /**
   * take(), only when the place is at hand and within `limit`: undefined (nothing counted) when it
   * would be refused or needs a write (fast-polls.ts leaves such requests to the usual path). `now`:
   * the caller's clock reading, taken once for its request.
   */
  takeAtHand(key: string, limit: number, now: number): Place | undefined;
}

const SWEEP_AT = 10_000;

/** Windows in this process's memory: the embedded database (one process), and failures per address. */
export class MemoryWindows implements Windows {
  private readonly windows = new Map<string, Place>();
  private readonly windowMs: number;
  constructor(windowMs: number) {
    this.windowMs = windowMs;
  }

  take(key: string, now = Date.now()): Place {
    let window = this.current(key, now);
    if (!window) {
      // Ended windows go once there are many keys (an address per failing client).
      if (this.windows.size >= SWEEP_AT) {
        for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
      }
      window = { position: 0, resetAt: now + this.windowMs };
      this.windows.set(key, window);
    }
    window.position++;
    return { position: window.position, resetAt: window.resetAt };
  }

  takeAtHand(key: string, limit: number, now: number): Place | undefined {
    return (this.current(key, now)?.position ?? 0) < limit ? this.take(key, now) : undefined;
  }

  /** How many were counted in `key`'s current window, without counting. */
  counted(key: string): Place | undefined {
    return this.current(key, Date.now());
  }

  private current(key: string, now: number): Place | undefined {
    const window = this.windows.get(key);
    return window && window.resetAt > now ? window : undefined;
  }
}

interface Block {
  /** The next place to hand out, and the last this process claimed. */
  next: number;
  last: number;
  resetAt: number;
  /** Requests waiting for the claim being written; undefined when none is. */
  waiting?: Array<{ resolve(place: Place): void; reject(error: unknown): void }>;
  /** How many places the last claim took beyond the requests that waited, and when it was made. */
  ahead: number;
  claimedAt: number;
}

/**
 * Windows kept in the database (Postgres: several API processes serve the same tokens). A process
 * claims places in one statement and hands them out from memory: the requests that arrive while a claim
 * is written are claimed together, and a key in steady use claims some places ahead (doubling while a
 * block lasts less than a second, at most 1/20 of the limit), so a busy poller costs a few writes a
 * second, not one a request. Places are never handed out twice across processes, so no more than the
 * limit get through; a place claimed ahead and not used by the window's end is lost, so near the limit
 * a key may be refused up to one block early per process (none when the limit is under 20 a window).
 * Once a claim reaches past the limit, the key is refused from memory until its window ends.
 */
export class SharedWindows implements Windows {
  private readonly blocks = new Map<string, Block>();
  private readonly db: Db;
  private readonly windowMs: number;
  private readonly maxAhead: number;
  private readonly limit: number;

  constructor(db: Db, windowMs: number, limit: number) {
    this.db = db;
    this.windowMs = windowMs;
    this.limit = limit;
    this.maxAhead = Math.min(1000, Math.floor(limit / 20));
  }

  take(key: string): Place | Promise<Place> {
    const now = Date.now();
    let block = this.blocks.get(key);
    if (block && block.resetAt > now && !block.waiting) {
      if (block.next <= block.last) return { position: block.next++, resetAt: block.resetAt };
      // Every place left in this window is past the limit: refused without a write.
      if (block.last >= this.limit) return { position: block.last + 1, resetAt: block.resetAt };
    }
    if (!block || (block.resetAt <= now && !block.waiting)) {
      if (this.blocks.size >= SWEEP_AT) {
        for (const [k, b] of this.blocks) if (b.resetAt <= now && !b.waiting) this.blocks.delete(k);
      }
      block = { next: 1, last: 0, resetAt: 0, ahead: 0, claimedAt: 0 };
      this.blocks.set(key, block);
    }
    const claiming = block;
    return new Promise<Place>((resolve, reject) => {
      if (claiming.waiting) claiming.waiting.push({ resolve, reject });
      else {
        claiming.waiting = [{ resolve, reject }];
        this.claim(key, claiming);
      }
    });
  }

  takeAtHand(key: string, limit: number, now: number): Place | undefined {
    const block = this.blocks.get(key);
    if (!block || block.resetAt <= now || block.waiting) return undefined;
    if (block.next > block.last || block.next > limit) return undefined;
    return { position: block.next++, resetAt: block.resetAt };
  }

  private claim(key: string, block: Block): void {
    const count = block.waiting?.length ?? 0;
    const now = Date.now();
    // A block that lasted under a second: this key is busy, claim further ahead next time.
    const busy = block.resetAt > now && now - block.claimedAt < 1000;
    const ahead = busy ? Math.min(this.maxAhead, Math.max(1, block.ahead * 2)) : 0;
    countInWindow(this.db, key, this.windowMs, count + ahead).then(
      ({ hits, ttlMs }) => {
        const all = block.waiting ?? [];
        block.waiting = undefined;
        block.resetAt = Date.now() + ttlMs;
        block.claimedAt = Date.now();
        block.ahead = ahead;
        block.last = hits;
        block.next = hits - count - ahead + 1;
        for (const w of all.slice(0, count)) w.resolve({ position: block.next++, resetAt: block.resetAt });
        // Requests that came while this claim was written: served from it, or by the next claim.
        const after = all.slice(count);
        while (after.length > 0 && (block.next <= block.last || block.last >= this.limit)) {
          const position = block.next <= block.last ? block.next++ : block.last + 1;
          after.shift()?.resolve({ position, resetAt: block.resetAt });
        }
        if (after.length > 0) {
          block.waiting = after;
          this.claim(key, block);
        }
      },
      (error: unknown) => {
        const all = block.waiting ?? [];
        block.waiting = undefined;
        for (const w of all) w.reject(error);
      },
    );
  }
}

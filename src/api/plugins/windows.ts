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

interface Waiter {
  resolve(place: Place): void;
  reject(error: unknown): void;
}

/** Places of a key's window this process claimed: next..last, in the window that ends at resetAt. */
interface Range {
  next: number;
  last: number;
  resetAt: number;
}

interface Block extends Range {
  /** Places claimed ahead while these lasted: handed out once they are gone. */
  spare: Range | undefined;
  /** A claim is being written. */
  claiming: boolean;
  /** Requests that found no place at hand, waiting for that claim (or the next). */
  waiting: Waiter[];
  /** How many places the last claim took beyond the requests that waited, and when it came back. */
  ahead: number;
  claimedAt: number;
}

/** A key whose places last less than this is busy: it claims twice as far ahead next time. */
const BUSY_MS = 1000;
/** A key whose places lasted longer than this has gone quiet: it claims for its waiting requests only. */
const QUIET_MS = 5000;

/**
 * Windows kept in the database (Postgres: several API processes serve the same tokens). A process
 * claims places in one statement and hands them out from memory: the requests that arrive while a claim
 * is written are claimed together, and a key in steady use claims some places ahead (doubling while
 * they last less than a second, at most 1/20 of the limit), so a busy poller costs a few writes a
 * second, not one a request. The next claim of a key in steady use is written once half of the places
 * claimed ahead are handed out, so its requests find a place at hand and none waits for a write (a kept
 * poll is then answered ahead of the router: fast-polls.ts). Places are never handed out twice across
 * processes, so no more than the limit get through; a place claimed ahead and not used by the window's
 * end is lost, so near the limit a key may be refused up to two claims early per process (none when the
 * limit is under 20 a window). Once a claim reaches past the limit, the key is refused from memory
 * until its window ends.
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
    this.maxAhead = Math.floor(limit / 20);
  }

  take(key: string): Place | Promise<Place> {
    const now = Date.now();
    let block = this.blocks.get(key);
    if (block) {
      refill(block, now);
      if (block.resetAt > now && block.waiting.length === 0) {
        if (block.next <= block.last) return this.handOut(key, block);
        // Every place left in this window is past the limit: refused without a write.
        if (block.last >= this.limit) return { position: block.last + 1, resetAt: block.resetAt };
      }
    } else {
      if (this.blocks.size >= SWEEP_AT) {
        for (const [k, b] of this.blocks) {
          if (b.resetAt <= now && !b.claiming && b.waiting.length === 0) this.blocks.delete(k);
        }
      }
      block = {
        next: 1,
        last: 0,
        resetAt: 0,
        spare: undefined,
        claiming: false,
        waiting: [],
        ahead: 0,
        claimedAt: 0,
      };
      this.blocks.set(key, block);
    }
    const claiming = block;
    return new Promise<Place>((resolve, reject) => {
      claiming.waiting.push({ resolve, reject });
      if (!claiming.claiming) this.claim(key, claiming);
    });
  }

  takeAtHand(key: string, limit: number, now: number): Place | undefined {
    const block = this.blocks.get(key);
    if (!block) return undefined;
    refill(block, now);
    if (block.resetAt <= now || block.waiting.length > 0) return undefined;
    if (block.next > block.last || block.next > limit) return undefined;
    return this.handOut(key, block);
  }

  /** The next place at hand; once half of the places claimed ahead are gone, the next claim is written. */
  private handOut(key: string, block: Block): Place {
    const place = { position: block.next++, resetAt: block.resetAt };
    if (
      !block.claiming &&
      block.spare === undefined &&
      block.ahead > 0 &&
      block.last < this.limit &&
      block.last - block.next + 1 <= block.ahead / 2
    ) {
      this.claim(key, block);
    }
    return place;
  }

  /** How far ahead of its waiting requests a key claims, by how long its last claim's places lasted. */
  private aheadOf(block: Block, now: number): number {
    const lasted = now - block.claimedAt;
    if (lasted < BUSY_MS) return Math.min(this.maxAhead, Math.max(1, block.ahead * 2));
    return lasted < QUIET_MS ? block.ahead : 0;
  }

  private claim(key: string, block: Block): void {
    const count = block.waiting.length;
    const ahead = this.aheadOf(block, Date.now());
    if (count + ahead === 0) return;
    block.claiming = true;
    countInWindow(this.db, key, this.windowMs, count + ahead).then(
      ({ hits, ttlMs }) => {
        const now = Date.now();
        block.claiming = false;
        block.claimedAt = now;
        block.ahead = ahead;
        const range = { next: hits - count - ahead + 1, last: hits, resetAt: now + ttlMs };
        if (block.next > block.last || block.resetAt <= now) Object.assign(block, range);
        else block.spare = range;
        // The waiting requests, in the order they came: from this claim, or by the next.
        let served = 0;
        while (
          served < block.waiting.length &&
          block.resetAt > now &&
          (block.next <= block.last || block.last >= this.limit)
        ) {
          const position = block.next <= block.last ? block.next++ : block.last + 1;
          block.waiting[served++]?.resolve({ position, resetAt: block.resetAt });
        }
        block.waiting = block.waiting.slice(served);
        if (block.waiting.length > 0) this.claim(key, block);
      },
      (error: unknown) => {
        block.claiming = false;
        const all = block.waiting;
        block.waiting = [];
        for (const w of all) w.reject(error);
      },
    );
  }
}

/** Moves to the places claimed ahead once the block's own are gone or their window has ended. */
function refill(block: Block, now: number): void {
  const { spare } = block;
  if (spare === undefined || (block.next <= block.last && block.resetAt > now)) return;
  block.spare = undefined;
  // Places of a window that has ended are lost, as any claimed ahead and not used.
  if (spare.resetAt > now) Object.assign(block, spare);
}

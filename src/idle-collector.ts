/**
 * A full garbage collection once the server goes quiet. V8 grows its heap under load and, in a process
 * that then allocates nothing, never collects again, so the space stays committed (the memory bench saw
 * +30% RSS after 20 s idle on Postgres, with the live heap unchanged). One collection after each spell
 * of activity gives it back; a busy server never pays for it.
 * @module
 */
import v8 from 'node:v8';
import vm from 'node:vm';

export interface IdleCollector {
  /** Something happened (a request answered): the next quiet period ends in a collection. */
  touch(): void;
  /**
   * Collects once no request came for `quietMs`: what the start allocated is given back after the
   * requests of whoever waited for it, rather than before the server answers them.
   */
  collectWhenQuiet(quietMs: number): void;
  stop(): void;
}

/** Node exposes `gc` only behind a flag; setting the flag at run time makes it reachable from a new context. */
function exposedGc(): () => void {
  if (typeof globalThis.gc === 'function') return globalThis.gc;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/**
 * The memory-reducing flavour: a plain major collection frees the objects but keeps most pages committed
 * (an embedded server 5 s after its start: 242 MB against 310 MB). Its price: it also flushes bytecode and
 * shrinks the new space to 1-2 MB, which V8 grows back only as objects survive scavenges, so a server whose
 * requests leave little behind scavenges more often for a long time after (docs/performance.md, "The idle
 * collector's price").
 */
function collectAll(): () => void {
  const gc = exposedGc() as (options?: { type: string; execution: string; flavor: string }) => void;
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

/** The young generation's spaces: what they hold is garbage or moves to the old generation at its next scavenge. */
const YOUNG = new Set(['new_space', 'new_large_object_space']);

/**
 * What the heap holds beyond its young generation. Young garbage is no regrowth: under load (requests to a
 * server other than the app's, such as the metrics endpoint) the new space fills and empties by its own
 * size (up to 64 MB), which counted as growth would earn a memory-reducing collection every few seconds.
 */
export function oldGenerationUsed(): number {
  let used = 0;
  for (const space of v8.getHeapSpaceStatistics())
    if (!YOUNG.has(space.space_name)) used += space.space_used_size;
  return used;
}

export interface CollectorOptions {
  /** This long without a request counts as quiet. */
  idleMs: number;
  /** While quiet, background work (the observer, schedules) allocating this much since the last collection earns another. */
  regrowBytes?: number;
  collect?: () => void;
  heapUsed?: () => number;
}

export function collectWhenIdle(options: CollectorOptions): IdleCollector {
  const { idleMs, regrowBytes = 16 * 1024 * 1024 } = options;
  const collect = options.collect ?? collectAll();
  const heapUsed = options.heapUsed ?? oldGenerationUsed;
  // A request only raises a flag (it runs on every request); the timer reads it. Two checks in a row that
  // find it down are at least idleMs apart from the last request.
  let active = false;
  let quietChecks = 0;
  let dirty = false;
  let usedAfterCollection = heapUsed();
  // Raised by every request, lowered by the quiet check: a check that finds it down is quietMs after the last.
  let recent = false;
  let quiet: NodeJS.Timeout | undefined;
  const collectNow = () => {
    dirty = false;
    collect();
    usedAfterCollection = heapUsed();
  };
  const timer = setInterval(() => {
    if (active) {
      active = false;
      quietChecks = 0;
      return;
    }
    if (++quietChecks < 2) return;
    if (dirty || heapUsed() - usedAfterCollection > regrowBytes) collectNow();
  }, idleMs / 2);
  timer.unref();
  return {
    touch() {
      active = true;
      dirty = true;
      recent = true;
    },
    collectWhenQuiet(quietMs) {
      dirty = true;
      recent = false;
      const check = () => {
        quiet = undefined;
        if (recent) {
          recent = false;
          quiet = setTimeout(check, quietMs).unref();
        } else if (dirty) collectNow();
      };
      quiet = setTimeout(check, quietMs).unref();
    },
    stop() {
      clearInterval(timer);
      clearTimeout(quiet);
    },
  };
}

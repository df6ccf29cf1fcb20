/**
 * The read cache of what clients poll (a deployment, a service, a service's custom domains): each
 * representation kept as the bytes its route serialized, with their ETag, until a change names it.
 *
 * Correctness rests on store/notifications.ts (topic `changes`): a committed change's tags drop what they name (whichever
 * process committed it), a commit of this process drops everything at once (its tags arrive later),
 * and while the notification connection is down nothing is kept: all is dropped and reads go to the
 * database until it is back. Terminal deployments never change, so they are kept throughout. A read
 * that a change overtook is served to the requests that asked before the change but not kept.
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Notifications, Subscriber } from '../store/notifications.ts';
import { etagOf, noneMatch } from './etag.ts';

/** What a cached route answers: the payload its response schema serializes. */
export interface Representation {
  payload: unknown;
  /** It can never change (a terminal deployment): kept even while changes cannot be seen. */
  immutable?: boolean;
}

export interface CachedRead {
  /** Names the representation, the account included. */
  key: string;
  /** The change tags (`changeTag`) that make it stale. */
  tags: string[];
  /** A bound on its age, for parts no notification covers (the provider's identity, read through a TTL). */
  maxAgeMs?: number;
  load(): Promise<Representation>;
}

export interface Entry {
  body: string;
  /** The body's length in bytes (its Content-Length), counted once when read. */
  bytes: number;
  etag: string;
  immutable: boolean;
  tags: string[];
  expiresAt: number;
}

interface Loading {
  promise: Promise<Entry>;
  tags: string[];
  /** A change named it while it loaded: served to those who asked before, not kept. */
  stale: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's read cache (tests and the benchmark look at what it holds). */
    readCache: ReadCache;
  }
  interface FastifyContextConfig {
    /** Served through the read cache: the path's resources are loaded only when the cache misses. */
    readCache?: boolean;
  }
}

/**
 * The keys of the cached routes' representations, in one place: the routes keep and find them by these,
 * and so does fast-polls.ts, which answers kept ones ahead of the router.
 */
export const readKeys = {
  deployment: (accountId: string, deploymentId: string) => `deployment ${accountId} ${deploymentId}`,
  service: (accountId: string, envId: string, serviceId: string) =>
    `service ${accountId} ${envId} ${serviceId}`,
  customDomains: (accountId: string, envId: string, serviceId: string) =>
    `custom-domains ${accountId} ${envId} ${serviceId}`,
};

const MAX_ENTRIES = 10_000;
/** RFC 7240 `wait`: the longest a read is held, in seconds. */
export const MAX_WAIT_S = 60;
export class ReadCache implements Subscriber {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Loading>();
  private readonly keysByTag = new Map<string, Set<string>>();
  /** Moves on every event that invalidates everything; a read that saw it move is not kept. */
  private epoch = 0;
  private live = false;
  private held = 0;
  private readonly notifications: Notifications;
  /** Aborts when the server closes: held reads end. */
  private readonly closing = new AbortController();

  constructor(notifications: Notifications) {
    this.notifications = notifications;
  }

  /**
   * The kept representation of `key` while it is fresh: without a promise, as most polls find it. `now`:
   * the request's clock reading, when its caller took one.
   */
  kept(key: string, now = Date.now()): Entry | undefined {
    const hit = this.entries.get(key);
    return hit && hit.expiresAt > now ? hit : undefined;
  }

  /** The current representation: kept, being loaded by an earlier request, or loaded now. */
  async read(spec: CachedRead, serialize: (payload: unknown) => string): Promise<Entry> {
    const hit = this.kept(spec.key);
    if (hit) return hit;
    const pending = this.loading.get(spec.key);
    if (pending) return pending.promise;
    const epoch = this.epoch;
    const loading: Loading = {
      tags: spec.tags,
      stale: false,
      promise: spec.load().then(({ payload, immutable }) => {
        const body = serialize(payload);
        return {
          body,
          bytes: Buffer.byteLength(body),
          etag: etagOf(body),
          immutable: immutable === true,
          tags: spec.tags,
          expiresAt: spec.maxAgeMs === undefined || immutable ? Infinity : Date.now() + spec.maxAgeMs,
        };
      }),
    };
    if (this.live) {
      this.loading.set(spec.key, loading);
      this.index(spec.key, spec.tags);
    }
    try {
      const entry = await loading.promise;
      if (this.live && !loading.stale && this.epoch === epoch) this.keep(spec.key, entry);
      return entry;
    } finally {
      if (this.loading.get(spec.key) === loading) this.loading.delete(spec.key);
    }
  }

  /** How many representations are kept (tests and the benchmark read it). */
  get size(): number {
    return this.entries.size;
  }

  /** How many reads are held waiting for a change. */
  get waiting(): number {
    return this.held;
  }

  /**
   * Holds until a change names one of `tags` (true) or `ms` pass (false); `signal` or the server's
   * close ends it early (false). While changes cannot be seen it ends every second (true), so the caller
   * looks again. A held read costs a timer and a set entry: no query.
   */
  async waitForChange(tags: string[], ms: number, signal: AbortSignal): Promise<boolean> {
    this.held++;
    try {
      const until = AbortSignal.any([signal, this.closing.signal]);
      const { woken } = await this.notifications.arm(
        tags.map((tag) => ['changes', tag]),
        ms,
        until,
      );
      return await woken;
    } finally {
      this.held--;
    }
  }

  /** Ends every held read as if its time had passed (the server is closing). */
  release(): void {
    this.closing.abort();
  }

  notified(tags: string[]): void {
    for (const tag of tags) {
      const keys = this.keysByTag.get(tag);
      if (keys) {
        this.keysByTag.delete(tag);
        for (const key of keys) this.drop(key);
      }
    }
  }

  committedHere(): void {
    this.dropAll();
  }

  down(): void {
    this.live = false;
    this.dropAll();
  }

  up(): void {
    this.epoch++;
    this.live = true;
  }

  private keep(key: string, entry: Entry): void {
    if (this.entries.size >= MAX_ENTRIES && !this.entries.has(key)) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.drop(oldest);
    }
    this.entries.set(key, entry);
    this.index(key, entry.tags);
  }

  private index(key: string, tags: string[]): void {
    for (const tag of tags) {
      let keys = this.keysByTag.get(tag);
      if (!keys) {
        keys = new Set();
        this.keysByTag.set(tag, keys);
      }
      keys.add(key);
    }
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    const loading = this.loading.get(key);
    this.entries.delete(key);
    this.loading.delete(key);
    if (loading) loading.stale = true;
    for (const tag of [...(entry?.tags ?? []), ...(loading?.tags ?? [])]) {
      const keys = this.keysByTag.get(tag);
      keys?.delete(key);
      if (keys?.size === 0) this.keysByTag.delete(tag);
    }
  }

  /** Everything but what can never change. */
  private dropAll(): void {
    this.epoch++;
    for (const loading of this.loading.values()) loading.stale = true;
    this.loading.clear();
    for (const [key, entry] of this.entries) if (!entry.immutable) this.drop(key);
  }
}

/**
 * The `wait` preference of a Prefer header (RFC 7240: `Prefer: wait=10`, maybe beside others), in
 * seconds and at most MAX_WAIT_S; undefined when absent or not a number of seconds.
 */
export function preferredWait(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  for (const preference of [header].flat().join(',').split(',')) {
    const [name, value] = (preference.split(';')[0] ?? '').split('=').map((part) => part.trim());
    if (name?.toLowerCase() !== 'wait' || value === undefined || !/^\d{1,9}$/.test(value)) continue;
    return Math.min(MAX_WAIT_S, Number(value));
  }
  return undefined;
}

/**
 * Answers a cached GET: the kept bytes (or freshly serialized ones) with their ETag, or 304 Not Modified
 * when If-None-Match already names it (here rather than in conditional-reads.ts's onSend hook, so a
 * cached route passes no onSend phase). With `Prefer: wait=N` and an If-None-Match that is current, the
 * request is held until a change gives a new representation (200) or N seconds pass (304). A kept
 * representation is answered without a promise.
 */
export function cachedGet(
  cache: ReadCache,
  request: FastifyRequest,
  reply: FastifyReply,
  spec: CachedRead,
): void | Promise<void> {
  const seen = request.headers['if-none-match'];
  const waitS = seen === undefined ? undefined : preferredWait(request.headers.prefer);
  const kept = cache.kept(spec.key);
  if (kept && (waitS === undefined || noneMatch(seen, kept.etag))) answer(reply, seen, kept);
  else return readAndAnswer(cache, reply, spec, seen, waitS);
}

async function readAndAnswer(
  cache: ReadCache,
  reply: FastifyReply,
  spec: CachedRead,
  seen: string | undefined,
  waitS: number | undefined,
): Promise<void> {
  const serialize = (payload: unknown) => String(reply.serialize(payload));
  let entry = await cache.read(spec, serialize);
  if (seen !== undefined && waitS !== undefined && !noneMatch(seen, entry.etag)) {
    reply.header('preference-applied', `wait=${waitS}`);
    const deadline = Date.now() + waitS * 1000;
    // A client that goes away stops being waited for.
    const gone = new AbortController();
    const onClose = () => gone.abort();
    reply.raw.once('close', onClose);
    try {
      while (await cache.waitForChange(spec.tags, deadline - Date.now(), gone.signal)) {
        entry = await cache.read(spec, serialize);
        if (noneMatch(seen, entry.etag)) break;
      }
    } finally {
      reply.raw.off('close', onClose);
    }
  }
  answer(reply, seen, entry);
}

function answer(reply: FastifyReply, seen: string | undefined, entry: Entry): void {
  reply.header('etag', entry.etag);
  if (!noneMatch(seen, entry.etag)) reply.code(304).send();
  // Already JSON: sent as is, past the route's serializer.
  else reply.type('application/json; charset=utf-8').send(entry.body);
}

/**
 * The read cache of what clients poll (a deployment, a service, a service's custom domains): each
 * representation kept as the bytes its route serialized, with their ETag, until a change names it.
 *
 * Correctness rests on store/changes.ts: a committed change's tags drop what they name (whichever
 * process committed it), a commit of this process drops everything at once (its tags arrive later),
 * and while the notification connection is down nothing is kept: all is dropped and reads go to the
 * database until it is back. Terminal deployments never change, so they are kept throughout. A read
 * that a change overtook is served to the requests that asked before the change but not kept.
 * @module
 */
import type { FastifyReply } from 'fastify';
import type { ChangeListener } from '../store/changes.ts';
import { etagOf } from './etag.ts';

/** What a cached route answers: the payload its response schema serializes. */
export interface Representation {
  payload: unknown;
  /** It can never change (a terminal deployment): kept even while changes cannot be seen. */
  immutable?: boolean;
}

export interface CachedRead {
  /** Names the representation, the account included. */
  key: string;
  /** The change tags (migration 0013's) that make it stale. */
  tags: string[];
  /** A bound on its age, for parts no notification covers (the provider's identity, read through a TTL). */
  maxAgeMs?: number;
  load(): Promise<Representation>;
}

export interface Entry {
  body: string;
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
  interface FastifyContextConfig {
    /** Served through the read cache: the path's resources are loaded only when the cache misses. */
    readCache?: boolean;
  }
}

const MAX_ENTRIES = 10_000;

export class ReadCache implements ChangeListener {
  private readonly entries = new Map<string, Entry>();
  private readonly loading = new Map<string, Loading>();
  private readonly keysByTag = new Map<string, Set<string>>();
  /** Moves on every event that invalidates everything; a read that saw it move is not kept. */
  private epoch = 0;
  private live = false;

  /** The current representation: kept, being loaded by an earlier request, or loaded now. */
  async read(spec: CachedRead, serialize: (payload: unknown) => string): Promise<Entry> {
    const hit = this.entries.get(spec.key);
    if (hit && hit.expiresAt > Date.now()) return hit;
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

  changed(tags: string[]): void {
    for (const tag of tags) {
      const keys = this.keysByTag.get(tag);
      if (!keys) continue;
      this.keysByTag.delete(tag);
      for (const key of keys) this.drop(key);
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

/** Answers a cached GET: the kept bytes (or freshly serialized ones), with their ETag for conditional-reads.ts. */
export async function cachedGet(
  cache: ReadCache,
  reply: FastifyReply,
  spec: CachedRead,
): Promise<FastifyReply> {
  const entry = await cache.read(spec, (payload) => String(reply.serialize(payload)));
  // Already JSON: sent as is, past the route's serializer.
  return reply.header('etag', entry.etag).type('application/json; charset=utf-8').send(entry.body);
}

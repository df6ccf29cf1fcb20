import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { bearerToken, hashApiToken } from '../../domain/api-token.ts';
import { ForbiddenError, UnauthorizedError } from '../../domain/errors.ts';
import { effectiveFeatures, type Plan } from '../../domain/plans.ts';
import { type EnvironmentScope, type Role, tokenActsWith } from '../../domain/roles.ts';
import type { Actor, Call } from '../../domain/usecases/context.ts';
import type { Db } from '../../store/database.ts';
import { findActiveToken, touchTokens } from '../../store/repositories/accounts.ts';
import { clientAddress } from '../client-address.ts';

export interface AuthContext {
  accountId: string;
  /** The token's id, or the session's (what rate limits and stream caps count by). */
  tokenId: string;
  /** Set when a person's session cookie authenticated the request (plugins/sessions.ts). */
  sessionId?: string;
  plan: Plan;
  features: Set<string>;
  /** What the token may do: its own role, never above its owner's membership (operator tokens: owner). */
  role: Role;
  /** The environments it may reach (its own scope within its owner's); null: all of the account's. */
  environments: EnvironmentScope;
  readOnly: boolean;
  /** When it stops working (ms since the epoch); null: never. */
  expiresAt: number | null;
  /** The person who made the token; null for operator-issued tokens. */
  userId: string | null;
  userEmail: string | null;
  tokenName: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext | undefined;
  }
}

/**
 * Resolves bearer tokens, with a short cache so that a client polling many times a second costs one
 * token lookup per TTL. Revoking a token or changing a plan clears the cache at once, in every process
 * (the `access` notification, api/app.ts); a process that missed it sees the change within the TTL.
 * The cache is keyed by the Authorization header as sent, so that a hit costs neither the header's
 * parse nor the token's SHA-256 (most of authentication's CPU on a poll): the raw token is held in this
 * process's memory, never stored, and only while its entry is in the bounded cache.
 */
export const TTL_MS = 5000;
/**
 * An entry older than this is looked up again in the background when it is used, so a token in steady
 * use never reaches the TTL: its requests keep being answered from memory (and kept polls ahead of the
 * router, fast-polls.ts) rather than each one that comes while the entry is stale looking it up.
 */
export const REFRESH_MS = 4000;
const MAX_CACHED = 10_000;
/** `last_used_at` is written at most this often per token: never once per request. */
const TOUCH_MS = 60_000;

export class TokenAuthenticator {
  /** By Authorization header; the oldest entry goes first when full. */
  private readonly cache = new Map<string, { at: number; auth: AuthContext | null }>();
  /** Moves whenever the cache is cleared: a lookup that began before does not refill it. */
  private epoch = 0;
  /** When this process last marked each token used. */
  private readonly touched = new Map<string, number>();
  private readonly due = new Set<string>();
  private flushing: Promise<void> | null = null;
  /** Lookups under way by header: requests that come meanwhile share one. */
  private readonly lookingUp = new Map<string, Promise<AuthContext | null>>();
  private readonly db: Db;
  private readonly onError: (error: unknown) => void;
  constructor(db: Db, onError: (error: unknown) => void = () => {}) {
    this.db = db;
    this.onError = onError;
  }

  /** The caller's account: without a promise when the token was looked up within the TTL. */
  authenticate(header: string | undefined): AuthContext | Promise<AuthContext> {
    const entry = header === undefined ? undefined : this.cache.get(header);
    const now = Date.now();
    if (entry && now - entry.at <= TTL_MS) {
      if (now - entry.at > REFRESH_MS) this.refresh(header as string);
      return this.used(admitted(entry.auth));
    }
    const token = bearerToken(header);
    if (!token) throw new UnauthorizedError();
    return this.lookUp(header as string, token).then((auth) => this.used(admitted(auth)));
  }

  /**
   * The caller, when `header` was looked up within the TTL and may call (not unknown, revoked, expired
   * or without a plan): what authenticate() would return without a promise. Undefined otherwise, with
   * nothing thrown or noted: fast-polls.ts then leaves the request to the usual path, which answers
   * and counts the failure. The token is noted as used only once `used` is called. `now`: the request's
   * clock reading, when its caller took one.
   */
  cached(header: string, now = Date.now()): AuthContext | undefined {
    const entry = this.cache.get(header);
    if (!entry || now - entry.at > TTL_MS || !admissible(entry.auth, now)) return undefined;
    if (now - entry.at > REFRESH_MS) this.refresh(header);
    return entry.auth;
  }

  /**
   * Notes the token as used: a write of `last_used_at` at most once a minute per token, off the request's
   * path (batched, never awaited by a request). `now` as for cached().
   */
  used(auth: AuthContext, now = Date.now()): AuthContext {
    const last = this.touched.get(auth.tokenId);
    if (last === undefined || now - last >= TOUCH_MS) {
      if (this.touched.size > 10_000) this.touched.clear();
      this.touched.set(auth.tokenId, now);
      this.due.add(auth.tokenId);
      this.flushing ??= Promise.resolve().then(() => this.flush());
    }
    return auth;
  }

  private async flush(): Promise<void> {
    try {
      while (this.due.size > 0) {
        const ids = [...this.due];
        this.due.clear();
        await touchTokens(this.db, ids, new Date()).catch(this.onError);
      }
    } finally {
      this.flushing = null;
    }
  }

  /** Waits for the pending `last_used_at` write and lookups, if any (before the database closes). */
  async settle(): Promise<void> {
    await Promise.allSettled([this.flushing, ...this.lookingUp.values()]);
  }

  /** Looks a kept entry up again ahead of its TTL, unless that is under way; nobody waits for it. */
  private refresh(header: string): void {
    const token = bearerToken(header);
    if (token) this.lookUp(header, token).catch(this.onError);
  }

  private lookUp(header: string, token: string): Promise<AuthContext | null> {
    const shared = this.lookingUp.get(header);
    if (shared) return shared;
    const pending: Promise<AuthContext | null> = this.read(header, hashApiToken(token)).finally(() => {
      if (this.lookingUp.get(header) === pending) this.lookingUp.delete(header);
    });
    this.lookingUp.set(header, pending);
    return pending;
  }

  private async read(header: string, hash: string): Promise<AuthContext | null> {
    const epoch = this.epoch;
    const row = await findActiveToken(this.db, hash);
    // The index found the row by hash; compare again in constant time as the contract asks.
    const valid = row && timingSafeEqual(Buffer.from(row.token_hash), Buffer.from(hash));
    // A person's token lives only as long as its owner's membership, and never does more than it.
    const member = row?.owner_user_id === null || row?.member_role != null;
    const auth =
      valid && member
        ? {
            accountId: row.account_id,
            tokenId: row.token_id,
            plan: row.plan as Plan,
            features: effectiveFeatures(row.plan as Plan, row.features),
            ...tokenActsWith(row, { role: row.member_role, environment_ids: row.member_environment_ids }),
            readOnly: row.read_only,
            expiresAt: row.expires_at ? row.expires_at.getTime() : null,
            userId: row.owner_user_id,
            userEmail: row.user_email,
            tokenName: row.token_name,
          }
        : null;
    // A revocation or plan change that came while the row was read: the row may predate it.
    if (epoch !== this.epoch) return auth;
    this.cache.delete(header);
    if (this.cache.size >= MAX_CACHED) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(header, { at: Date.now(), auth });
    return auth;
  }

  forget(): void {
    this.epoch++;
    this.cache.clear();
    // A lookup under way may have read the row before the change: later requests do not join it.
    this.lookingUp.clear();
  }
}

function admitted(auth: AuthContext | null): AuthContext {
  if (!auth || (auth.expiresAt !== null && auth.expiresAt <= Date.now())) throw new UnauthorizedError();
  if (auth.plan === 'none') throw new ForbiddenError("You don't have an active plan");
  return auth;
}

/** What admitted() lets through, without throwing. */
function admissible(auth: AuthContext | null, now: number): auth is AuthContext {
  return auth !== null && (auth.expiresAt === null || auth.expiresAt > now) && auth.plan !== 'none';
}

/** The caller of a /v1 route, authenticated by the onRequest hook before any handler runs. */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new Error('authOf called on a route without token authentication');
  return request.auth;
}

/** The request as use cases see it: its id, client address and Idempotency-Key claim (see plugins/idempotency.ts). */
export function callOf(request: FastifyRequest): Call {
  return {
    requestId: String(request.id),
    clientAddress: clientAddress(request),
    idempotency: request.idempotency,
  };
}

export function actorOf(request: FastifyRequest): Actor {
  const auth = authOf(request);
  const agent = request.headers['user-agent'];
  return {
    accountId: auth.accountId,
    // A person signed in: the audit log names them, not a token.
    tokenId: auth.sessionId ? null : auth.tokenId,
    ...(auth.sessionId && auth.userEmail ? { name: auth.userEmail } : {}),
    userId: auth.userId,
    userEmail: auth.userEmail,
    tokenName: auth.tokenName,
    userAgent: agent ? agent.slice(0, 400) : undefined,
    ...callOf(request),
  };
}

export function requireFeature(request: FastifyRequest, feature: string): void {
  if (!request.auth?.features.has(feature)) {
    throw new ForbiddenError(`Your plan does not include ${feature.replace('_', ' ')}`);
  }
}

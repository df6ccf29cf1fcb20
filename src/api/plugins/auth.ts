import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { bearerToken, hashApiToken } from '../../domain/api-token.ts';
import { ForbiddenError, UnauthorizedError } from '../../domain/errors.ts';
import { effectiveFeatures, type Plan } from '../../domain/plans.ts';
import type { Actor, Call } from '../../domain/usecases/context.ts';
import type { Db } from '../../store/database.ts';
import { findActiveToken } from '../../store/repositories/accounts.ts';
import { clientAddress } from '../client-address.ts';

export interface AuthContext {
  accountId: string;
  tokenId: string;
  plan: Plan;
  features: Set<string>;
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
 */
const TTL_MS = 5000;

export class TokenAuthenticator {
  private readonly cache = new Map<string, { at: number; auth: AuthContext | null }>();
  private readonly db: Db;
  constructor(db: Db) {
    this.db = db;
  }

  /** The caller's account: without a promise when the token was looked up within the TTL. */
  authenticate(header: string | undefined): AuthContext | Promise<AuthContext> {
    const token = bearerToken(header);
    if (!token) throw new UnauthorizedError();
    const hash = hashApiToken(token);
    const entry = this.cache.get(hash);
    if (entry && Date.now() - entry.at <= TTL_MS) return admitted(entry.auth);
    return this.lookUp(hash).then(admitted);
  }

  private async lookUp(hash: string): Promise<AuthContext | null> {
    const row = await findActiveToken(this.db, hash);
    // The index found the row by hash; compare again in constant time as the contract asks.
    const valid = row && timingSafeEqual(Buffer.from(row.token_hash), Buffer.from(hash));
    const auth = valid
      ? {
          accountId: row.account_id,
          tokenId: row.token_id,
          plan: row.plan as Plan,
          features: effectiveFeatures(row.plan as Plan, row.features),
        }
      : null;
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(hash, { at: Date.now(), auth });
    return auth;
  }

  forget(): void {
    this.cache.clear();
  }
}

function admitted(auth: AuthContext | null): AuthContext {
  if (!auth) throw new UnauthorizedError();
  if (auth.plan === 'none') throw new ForbiddenError("You don't have an active plan");
  return auth;
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
  return { accountId: auth.accountId, tokenId: auth.tokenId, ...callOf(request) };
}

export function requireFeature(request: FastifyRequest, feature: string): void {
  if (!request.auth?.features.has(feature)) {
    throw new ForbiddenError(`Your plan does not include ${feature.replace('_', ' ')}`);
  }
}

import rateLimit, { type FastifyRateLimitStore } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { RateLimitedError } from '../../domain/errors.ts';
import type { Db } from '../../store/database.ts';
import { countInWindow } from '../../store/repositories/rate-limits.ts';

const WINDOW_MS = 60_000;

/**
 * The per-token window kept in the database (@fastify/rate-limit's custom store interface), so every
 * API process on one Postgres database counts against the same limit.
 */
function databaseStore(db: Db) {
  return class DatabaseStore implements FastifyRateLimitStore {
    incr(
      key: string,
      callback: (error: Error | null, result?: { current: number; ttl: number }) => void,
      timeWindow: number,
    ): void {
      countInWindow(db, key, timeWindow).then(
        ({ hits, ttlMs }) => callback(null, { current: hits, ttl: ttlMs }),
        (error: Error) => callback(error),
      );
    }
    child(): FastifyRateLimitStore {
      return this;
    }
  };
}

/**
 * Per API token, a fixed window of one minute. Runs after authentication (the key is the token id), so
 * every authenticated response carries RateLimit-Limit / -Remaining / -Reset, and a 429 carries
 * Retry-After. `db` given: the window lives in the database (several processes serve); otherwise in
 * this process's memory (the embedded database has one process).
 */
export async function registerRateLimit(app: FastifyInstance, perMinute: number, db?: Db): Promise<void> {
  await app.register(rateLimit, {
    max: perMinute,
    timeWindow: WINDOW_MS,
    hook: 'onRequest',
    enableDraftSpec: true,
    ...(db ? { store: databaseStore(db) } : {}),
    keyGenerator: (request) => request.auth?.tokenId ?? request.ip,
    errorResponseBuilder: (_request, context) =>
      new RateLimitedError(
        `Rate limit exceeded: at most ${context.max} requests per minute for one API token. Retry in ${Math.ceil(context.ttl / 1000)} seconds.`,
      ),
  });
}

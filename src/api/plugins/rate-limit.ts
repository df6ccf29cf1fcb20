import rateLimit, { type FastifyRateLimitStore } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { RateLimitedError } from '../../domain/errors.ts';
import type { Db } from '../../store/database.ts';
import { countInWindow } from '../../store/repositories/rate-limits.ts';

const WINDOW_MS = 60_000;

type Counted = (error: Error | null, result?: { current: number; ttl: number }) => void;

/**
 * The per-token window kept in the database (@fastify/rate-limit's custom store interface), so every
 * API process on one Postgres database counts against the same limit. Requests of one token that
 * arrive while its count is being written are counted together by the next write (one statement for
 * the lot, each given its own place in the window): a poller's 50 connections do not queue 50 writes
 * on one row. The count stays exact across processes.
 */
function databaseStore(db: Db) {
  const waiting = new Map<string, Counted[]>();
  const writing = new Set<string>();
  const write = (key: string, timeWindow: number) => {
    const batch = waiting.get(key) ?? [];
    waiting.delete(key);
    writing.add(key);
    countInWindow(db, key, timeWindow, batch.length)
      .then(
        ({ hits, ttlMs }) => {
          const first = hits - batch.length + 1;
          for (const [i, counted] of batch.entries()) counted(null, { current: first + i, ttl: ttlMs });
        },
        (error: Error) => {
          for (const counted of batch) counted(error);
        },
      )
      .finally(() => {
        writing.delete(key);
        if (waiting.has(key)) write(key, timeWindow);
      });
  };
  return class DatabaseStore implements FastifyRateLimitStore {
    incr(key: string, callback: Counted, timeWindow: number): void {
      const batch = waiting.get(key);
      if (batch) batch.push(callback);
      else waiting.set(key, [callback]);
      if (!writing.has(key)) write(key, timeWindow);
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

import type { FastifyReply } from 'fastify';
import { RateLimitedError } from '../../domain/errors.ts';
import type { Db } from '../../store/database.ts';
import { MemoryWindows, type Place, SharedWindows, type Windows } from './windows.ts';

const WINDOW_MS = 60_000;

/**
 * Per API token, a fixed window of one minute (windows.ts). Counted after authentication (the key is
 * the token id), so every authenticated response carries RateLimit-Limit / -Remaining / -Reset (the
 * IETF draft's fields), and a 429 carries Retry-After. `db` given: the window lives in the database
 * (several processes serve); otherwise in this process's memory (the embedded database has one
 * process). `onRefused` counts each 429. Counting costs no promise when the place is at hand.
 */
export function tokenRateLimit(perMinute: number, db?: Db, onRefused?: () => void): TokenRateLimit {
  const windows: Windows = db ? new SharedWindows(db, WINDOW_MS, perMinute) : new MemoryWindows(WINDOW_MS);
  const answer = (reply: FastifyReply, place: Place): void => {
    const { limit, remaining, resetS } = rateLimitFields(perMinute, place);
    reply.header('ratelimit-limit', limit);
    reply.header('ratelimit-remaining', remaining);
    reply.header('ratelimit-reset', resetS);
    if (place.position > perMinute) {
      reply.header('retry-after', resetS);
      onRefused?.();
      throw new RateLimitedError(
        `Rate limit exceeded: at most ${perMinute} requests per minute for one API token. Retry in ${resetS} seconds.`,
      );
    }
  };
  return {
    count(reply, tokenId) {
      const place = windows.take(tokenId);
      if (place instanceof Promise) return place.then((p) => answer(reply, p));
      answer(reply, place);
    },
    countAtHand(tokenId, now) {
      const place = windows.takeAtHand(tokenId, perMinute, now);
      return place && rateLimitFields(perMinute, place, now);
    },
  };
}

/** The RateLimit-* fields of a request's place: the same numbers on either path. */
export interface RateLimitFields {
  limit: number;
  remaining: number;
  resetS: number;
}

function rateLimitFields(perMinute: number, { position, resetAt }: Place, now = Date.now()): RateLimitFields {
  return {
    limit: perMinute,
    remaining: Math.max(0, perMinute - position),
    resetS: Math.max(0, Math.ceil((resetAt - now) / 1000)),
  };
}

export interface TokenRateLimit {
  /** Counts a request of `tokenId`, setting the headers on `reply`; throws the 429 past the limit. */
  count(reply: FastifyReply, tokenId: string): void | Promise<void>;
  /**
   * Counts it only when its place is at hand and within the limit, and returns its headers' fields;
   * otherwise counts nothing (fast-polls.ts then leaves the request to the usual path). `now`: the
   * request's clock reading.
   */
  countAtHand(tokenId: string, now: number): RateLimitFields | undefined;
}

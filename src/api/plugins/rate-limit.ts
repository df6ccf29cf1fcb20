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
 * process). `onRefused` counts each 429. Returns what the /v1 authentication hook calls: without a promise when the place is at hand.
 */
export function tokenRateLimit(perMinute: number, db?: Db, onRefused?: () => void) {
  const windows: Windows = db ? new SharedWindows(db, WINDOW_MS, perMinute) : new MemoryWindows(WINDOW_MS);
  const answer = (reply: FastifyReply, { position, resetAt }: Place): void => {
    const resetS = Math.max(0, Math.ceil((resetAt - Date.now()) / 1000));
    reply.header('ratelimit-limit', perMinute);
    reply.header('ratelimit-remaining', Math.max(0, perMinute - position));
    reply.header('ratelimit-reset', resetS);
    if (position > perMinute) {
      reply.header('retry-after', resetS);
      onRefused?.();
      throw new RateLimitedError(
        `Rate limit exceeded: at most ${perMinute} requests per minute for one API token. Retry in ${resetS} seconds.`,
      );
    }
  };
  return (reply: FastifyReply, tokenId: string): void | Promise<void> => {
    const place = windows.take(tokenId);
    if (place instanceof Promise) return place.then((p) => answer(reply, p));
    answer(reply, place);
  };
}

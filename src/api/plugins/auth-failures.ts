import type { FastifyReply, FastifyRequest } from 'fastify';
import { RateLimitedError, UnauthorizedError } from '../../domain/errors.ts';
import { clientAddress } from '../client-address.ts';
import { MemoryWindows } from './windows.ts';

/**
 * Failed authentication per client address (client-address.ts: behind a trusted proxy, the address it
 * forwarded; behind one not in BERTH_TRUST_PROXY, the proxy's), a fixed
 * window of one minute, in this process's memory. Once an address has failed `perMinute` times, every
 * further request from it is answered 429 until the window ends, without looking the token up: an
 * unknown token costs a database lookup, and a wrong admin token is a guess. Counted: a missing,
 * malformed, unknown or revoked token on /v1 and a wrong token on /admin/v1. Webhook deliveries signed by
 * no connection count in an instance of their own (app.ts), so they never lock an address out of the API.
 */
export interface AuthFailureLimit {
  /**
   * Runs `authenticate`, refusing first when the address is over its limit and counting a 401. Returns
   * without a promise when `authenticate` does.
   */
  guard<T>(request: FastifyRequest, reply: FastifyReply, authenticate: () => T | Promise<T>): T | Promise<T>;
  /**
   * Whether some address may be refused now (one reached the limit in a window not yet over): while
   * none is, guard() lets every request through to `authenticate`, whatever its address.
   */
  refusingAny(): boolean;
}

/** What the metrics count: each failed authentication, and each request refused for too many of them. */
export interface AuthFailureCounters {
  failed(): void;
  refused(): void;
}

/** What failures count by: the client's address, or (password sign-in) the account signed in to. */
export interface FailureKey {
  of(request: FastifyRequest): string;
  /** Named in the 429: `this address`. */
  what: string;
}

const BY_ADDRESS: FailureKey = { of: clientAddress, what: 'this address' };

export function authFailureLimit(
  perMinute: number,
  counters?: AuthFailureCounters,
  by: FailureKey = BY_ADDRESS,
): AuthFailureLimit {
  const failures = new MemoryWindows(60_000);
  /** When the last window that reached the limit ends. */
  let refusingUntil = 0;
  const counted = (request: FastifyRequest, error: unknown): never => {
    if (error instanceof UnauthorizedError) {
      const { position, resetAt } = failures.take(by.of(request));
      if (position >= perMinute) refusingUntil = Math.max(refusingUntil, resetAt);
      counters?.failed();
    }
    throw error;
  };
  return {
    refusingAny: () => refusingUntil > Date.now(),
    guard(request, reply, authenticate) {
      const window = failures.counted(by.of(request));
      if (window && window.position >= perMinute) {
        const retryS = Math.max(1, Math.ceil((window.resetAt - Date.now()) / 1000));
        reply.header('retry-after', retryS);
        counters?.refused();
        throw new RateLimitedError(
          `Too many failed authentications ${by.what === BY_ADDRESS.what ? 'from' : 'for'} ${by.what}: at most ${perMinute} per minute. Retry in ${retryS} seconds.`,
        );
      }
      let result: ReturnType<typeof authenticate>;
      try {
        result = authenticate();
      } catch (error) {
        return counted(request, error);
      }
      return result instanceof Promise ? result.catch((error: unknown) => counted(request, error)) : result;
    },
  };
}

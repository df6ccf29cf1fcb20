import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RateLimitedError, UnauthorizedError } from '../../domain/errors.ts';

/**
 * Failed authentication per client address (the socket's peer: behind a proxy, the proxy's), a fixed
 * window of one minute, in this process's memory. Once an address has failed `perMinute` times, every
 * further request from it is answered 429 until the window ends, without looking the token up: an
 * unknown token costs a database lookup, and a wrong admin token is a guess. Counted: a missing,
 * malformed, unknown or revoked token on /v1 and a wrong token on /admin/v1.
 */
export interface AuthFailureLimit {
  /** Runs `authenticate`, refusing first when the address is over its limit and counting a 401. */
  guard<T>(request: FastifyRequest, reply: FastifyReply, authenticate: () => T | Promise<T>): Promise<T>;
}

export async function authFailureLimit(app: FastifyInstance, perMinute: number): Promise<AuthFailureLimit> {
  await app.register(rateLimit, { global: false });
  const failures = app.createRateLimit({
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => request.ip,
  });
  return {
    async guard(request, reply, authenticate) {
      const state = await failures(request, { increment: false });
      if (!state.isAllowed && state.remaining <= 0) {
        reply.header('retry-after', state.ttlInSeconds);
        throw new RateLimitedError(
          `Too many failed authentications from this address: at most ${perMinute} per minute. Retry in ${state.ttlInSeconds} seconds.`,
        );
      }
      try {
        return await authenticate();
      } catch (error) {
        if (error instanceof UnauthorizedError) await failures(request);
        throw error;
      }
    },
  };
}

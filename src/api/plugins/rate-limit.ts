import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { RateLimitedError } from '../../domain/errors.ts';

/**
 * Per API token, a fixed window of one minute. Runs after authentication (the key is the token id), so
 * every authenticated response carries RateLimit-Limit / -Remaining / -Reset, and a 429 carries
 * Retry-After.
 */
export async function registerRateLimit(app: FastifyInstance, perMinute: number): Promise<void> {
  await app.register(rateLimit, {
    max: perMinute,
    timeWindow: 60_000,
    hook: 'onRequest',
    enableDraftSpec: true,
    keyGenerator: (request) => request.auth?.tokenId ?? request.ip,
    errorResponseBuilder: (_request, context) =>
      new RateLimitedError(
        `Rate limit exceeded: at most ${context.max} requests per minute for one API token. Retry in ${Math.ceil(context.ttl / 1000)} seconds.`,
      ),
  });
}

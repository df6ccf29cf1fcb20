/**
 * Conditional reads: every single-resource GET (a route with `config.etag`) answers with an ETag, and
 * with 304 Not Modified (no body) when If-None-Match already names it. The tag is etag.ts's: a hash of
 * the very bytes the route serialized, or the one a cached read (read-cache.ts) computed with them.
 * @module
 */
import type { FastifyInstance, onSendHookHandler } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { etagOf, noneMatch } from '../etag.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A single-resource GET: ETag on its 200, 304 on a matching If-None-Match. */
    etag?: boolean;
  }
}

export function registerConditionalReads(app: FastifyInstance): void {
  // On the routes that ask for it only: the others pay nothing per request. A cached read
  // (read-cache.ts) answers its 304 itself.
  app.addHook('onRoute', (route) => {
    if (route.config?.etag !== true || route.config.readCache === true) return;
    route.onSend = [conditionalAnswer, ...[route.onSend ?? []].flat()];
  });
}

const conditionalAnswer: onSendHookHandler = (request, reply, payload, done) => {
  if (reply.statusCode !== 200 || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) {
    done(null, payload);
    return;
  }
  const given = reply.getHeader('etag');
  const etag = typeof given === 'string' ? given : etagOf(payload);
  reply.header('etag', etag);
  if (noneMatch(request.headers['if-none-match'], etag)) {
    done(null, payload);
    return;
  }
  reply.code(304).removeHeader('content-type');
  done(null, null);
};

const IF_NONE_MATCH = Type.String({
  maxLength: 8192,
  description:
    'ETag(s) of a copy the client holds (or *): when one is current the answer is 304 Not Modified, without a body.',
});

/** Request headers of a conditional GET, for the OpenAPI document (and so the typed client). */
export const ConditionalHeaders = Type.Object({ 'if-none-match': Type.Optional(IF_NONE_MATCH) });

/** A conditional GET that may also be held until the resource changes (read-cache.ts). */
export const WaitingHeaders = Type.Object({
  'if-none-match': Type.Optional(IF_NONE_MATCH),
  prefer: Type.Optional(
    Type.String({
      maxLength: 1000,
      description:
        'RFC 7240. `wait=<seconds>` (at most 60) with a current If-None-Match holds the request until the resource ' +
        'changes (200 with the new representation) or the time passes (304). Without If-None-Match, or with a ' +
        'stale one, the answer is immediate. Answers that waited carry `Preference-Applied: wait=<seconds>`.',
    }),
  ),
});

const ETAG_HEADER = {
  ETag: {
    type: 'string',
    maxLength: 100,
    description: 'Strong tag of this representation; send it back in If-None-Match',
  },
};

/** The 200 and 304 of a conditional GET: `ok` documented with its ETag header. */
export function conditionalResponses<T extends TSchema>(ok: T) {
  return {
    200: { ...ok, headers: ETAG_HEADER } as T,
    304: {
      ...Type.Null({
        description: 'Not Modified: the ETag in If-None-Match is current. No body; the ETag header is sent.',
      }),
      headers: ETAG_HEADER,
    },
  };
}

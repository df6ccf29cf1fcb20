import type { FastifyInstance, preValidationHookHandler } from 'fastify';
import { type FieldError, ValidationError } from '../../domain/errors.ts';

/**
 * Guards around bodies and query strings:
 * - JSON bodies nest at most MAX_JSON_DEPTH levels, checked on the raw text before anything recurses
 *   over the value (a 10,000-deep body would overflow the stack of every recursive walk after it): the
 *   JSON parser (json-body.ts) asks `nestsDeeperThan` before it parses.
 * - A route that takes no body ignores one: a client that always sends `Content-Type: application/json`
 *   (with an empty or stray body) on a DELETE gets the DELETE's answer, not a body error.
 * - No string in a body or a query may hold a NUL character: PostgreSQL text cannot store it, so it is a field
 *   error here rather than a failed write later.
 * - A query parameter a route declares may be given once: `?limit=1&limit=2` is a field error, not an
 *   array the handler never expected.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether JSON text opens more than `limit` arrays/objects at once: one pass, no recursion, no parse. */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

function nulFields(value: unknown, path: string, out: FieldError[]): void {
  if (typeof value === 'string') {
    if (value.includes('\u0000'))
      out.push({ field: path, error: `${path} must not contain a NUL character` });
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => {
      nulFields(item, `${path}[${i}]`, out);
    });
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) nulFields(item, path ? `${path}.${key}` : key, out);
  }
}

function repeatedQueryFields(query: unknown): FieldError[] {
  if (typeof query !== 'object' || query === null) return [];
  // A parameter without a name (`?=1`, `?&&`) names nothing.
  Reflect.deleteProperty(query, '');
  return Object.entries(query)
    .filter(([, value]) => Array.isArray(value))
    .map(([key]) => ({ field: key, error: `${key} must be given once` }));
}

/** Whether a request carries a body at all (the usual GET does not). */
const sendsBody = (headers: Record<string, unknown>) =>
  headers['content-type'] !== undefined ||
  headers['content-length'] !== undefined ||
  headers['transfer-encoding'] !== undefined;

function isEmpty(query: unknown): boolean {
  for (const _ in query as object) return false;
  return true;
}

export function registerBodyGuards(app: FastifyInstance): void {
  // Callback hooks: an async hook costs a promise per request. This one looks at the route only when
  // the request has a body: a poll has none.
  app.addHook('onRequest', (request, _reply, done) => {
    if (sendsBody(request.headers) && !request.routeOptions.schema?.body) {
      delete request.headers['content-type'];
      delete request.headers['content-length'];
      delete request.headers['transfer-encoding'];
    }
    done();
  });
  // Only routes that take a body or declare a query string have anything to check; the others skip
  // the preValidation phase altogether.
  app.addHook('onRoute', (route) => {
    if (!route.schema?.body && !route.schema?.querystring) return;
    route.preValidation = [guardBodyAndQuery, ...[route.preValidation ?? []].flat()];
  });
}

const guardBodyAndQuery: preValidationHookHandler = (request, _reply, done) => {
  const query = request.query;
  if (request.body === undefined && (typeof query !== 'object' || query === null || isEmpty(query))) {
    done();
    return;
  }
  const errors: FieldError[] = request.routeOptions.schema?.querystring ? repeatedQueryFields(query) : [];
  nulFields(request.body, '', errors);
  nulFields(query, '', errors);
  done(errors.length > 0 ? ValidationError.fields(errors) : undefined);
};

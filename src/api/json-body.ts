import type { FastifyInstance } from 'fastify';
import { scan } from 'secure-json-parse';
import { ValidationError } from '../domain/errors.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './plugins/body-guards.ts';

/** Bodies hold at most two 256 KiB documents (ops_json, helm_values_yml) and a few fields. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** The causes of an unreadable body, reported as `{"field":"body","error":<cause>}` (the spec's message stays). */
export const BODY_CAUSES = {
  missing: 'a JSON object is required (at least {})',
  notObject: 'body must be a JSON object',
  contentType: 'Content-Type must be application/json',
  contentLength: 'Content-Length does not match the body',
  tooLarge: `larger than ${BODY_LIMIT_BYTES / 1024 / 1024} MiB`,
  poisoned: 'body must not hold "__proto__" or "constructor.prototype"',
  tooDeep: `body must not nest arrays and objects more than ${MAX_JSON_DEPTH} deep`,
} as const;

/** Fastify's own body errors, by code. */
export const FASTIFY_BODY_CAUSES: Record<string, string> = {
  FST_ERR_CTP_EMPTY_JSON_BODY: BODY_CAUSES.missing,
  FST_ERR_CTP_INVALID_MEDIA_TYPE: BODY_CAUSES.contentType,
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: BODY_CAUSES.contentLength,
  FST_ERR_CTP_BODY_TOO_LARGE: BODY_CAUSES.tooLarge,
};

/** V8 names the offset of most syntax errors; a text that stops short ends at its length. */
function invalidJson(error: SyntaxError, text: string): string {
  const at = /at position (\d+)/.exec(error.message)?.[1];
  if (at !== undefined) return `invalid JSON at position ${at}`;
  if (/end of JSON input/.test(error.message)) return `invalid JSON at position ${text.length}`;
  return 'invalid JSON';
}

/**
 * JSON is the only body Berth reads (text/plain is not parsed: it answers the content-type cause). The
 * parser does what Fastify's does (JSON.parse, then prototype poisoning refused), refuses deep nesting
 * before parsing, and keeps where the JSON broke.
 */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.length === 0) return done(ValidationError.body(BODY_CAUSES.missing), undefined);
    if (nestsDeeperThan(text, MAX_JSON_DEPTH))
      return done(ValidationError.body(BODY_CAUSES.tooDeep), undefined);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return done(ValidationError.body(invalidJson(error as SyntaxError, text)), undefined);
    }
    try {
      if (typeof parsed === 'object' && parsed !== null)
        scan(parsed, { protoAction: 'error', constructorAction: 'error' });
    } catch {
      return done(ValidationError.body(BODY_CAUSES.poisoned), undefined);
    }
    done(null, parsed);
  });
}

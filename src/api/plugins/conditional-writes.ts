/**
 * Conditional writes: PUT secrets and PATCH service honour If-Match. The tag compared is etag.ts's, of
 * the representation the resource's GET would send now, serialized with that GET's own schema; so a
 * client sends back the ETag it read, and gets 412 (a `conflict`-shaped error) when someone changed the
 * resource in between. The check runs inside the write's transaction, after the row lock (the use case
 * calls it), so no write can slip between the check and the write.
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { PreconditionFailedError } from '../../domain/errors.ts';
import { etagOf, matches } from '../etag.ts';

const IF_MATCH = Type.String({
  maxLength: 8192,
  description:
    'The ETag of the representation the change was made from (from its GET): when the resource changed since, ' +
    'the answer is 412 `conflict` and nothing is written. Without it the write is unconditional.',
});

/** Request headers of a conditional write, for the OpenAPI document (and so the typed client). */
export const ConditionalWriteHeaders = Type.Object({ 'if-match': Type.Optional(IF_MATCH) });

/** Fastify types schemas as plain JSON objects; a TypeBox schema is one (the same object, so cached). */
const isJsonObject = (value: unknown): value is { [key: string]: unknown } =>
  typeof value === 'object' && value !== null;

/**
 * The check of one conditional write, or undefined without If-Match. `representation` turns the
 * resource as it is under the lock into the body its GET sends; `schema` is that GET's 200 schema.
 */
export function ifMatchCheck<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  schema: TSchema,
  what: string,
  representation: (current: T) => object,
): ((current: T) => void) | undefined {
  const header = request.headers['if-match'];
  if (header === undefined) return undefined;
  return (current) => {
    const body = representation(current) as Record<string, unknown>;
    if (!isJsonObject(schema)) throw new Error('a response schema is a JSON object');
    const etag = etagOf(reply.serializeInput(body, schema));
    if (!matches(header, etag)) {
      throw new PreconditionFailedError(
        `${what} changed since you read it (If-Match does not name its current ETag ${etag}): read it again and redo the change`,
      );
    }
  };
}

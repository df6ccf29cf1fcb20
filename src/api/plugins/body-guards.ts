import type { FastifyInstance } from 'fastify';
import { type FieldError, ValidationError } from '../../domain/errors.ts';

/**
 * Two guards around bodies:
 * - A route that takes no body ignores one: a client that always sends `Content-Type: application/json`
 *   (with an empty or stray body) on a DELETE gets the DELETE's answer, not a body error.
 * - No string in a body may hold a NUL character: PostgreSQL text cannot store it, so it is a field
 *   error here rather than a failed write later.
 */
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

export function registerBodyGuards(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (!request.routeOptions.schema?.body) {
      delete request.headers['content-type'];
      delete request.headers['content-length'];
      delete request.headers['transfer-encoding'];
    }
  });
  app.addHook('preValidation', async (request) => {
    const errors: FieldError[] = [];
    nulFields(request.body, '', errors);
    if (errors.length > 0) throw ValidationError.fields(errors);
  });
}

/**
 * The one error handler. Domain errors carry their status and code; Fastify's own errors (body parsing,
 * schema validation) are mapped by their code, never by message text. Anything else is a 500 whose
 * message is never echoed. The body is always {error_code, message, errors}.
 * @module
 */
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import {
  ApiError,
  type FieldError,
  NotFoundError,
  PartialFailureError,
  UNKNOWN_MESSAGE,
  UnreadableBodyError,
  ValidationError,
} from '../../domain/errors.ts';
import { closestField } from '../closest-field.ts';
import { BODY_CAUSES, FASTIFY_BODY_CAUSES } from '../json-body.ts';
import { SEQ_PATTERN } from '../schemas/common.ts';
import { RESOURCE_OF_PARAM } from './scope.ts';

/** Ajv's error, with the schema and data that `verbose` adds (see validation.ts). */
interface AjvError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: { properties?: Record<string, { readOnly?: boolean }> };
}

/** `unknown field "tag"; did you mean "docker_image_tag"?`: read-only fields are never suggested. */
function unknownField(error: AjvError, field: string, base: string): string {
  if (error.params.additionalProperty === '') return `${field} has a field with an empty name`;
  const known = Object.entries(error.parentSchema?.properties ?? {})
    .filter(([, schema]) => !schema.readOnly)
    .map(([name]) => name);
  const close = closestField(String(error.params.additionalProperty), known);
  const suggestion = close ? `; did you mean "${base ? `${base}.${close}` : close}"?` : '';
  return `unknown field "${field}"${suggestion}`;
}

/** `/secrets/2/key` -> `secrets[2].key` */
function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function describe(error: AjvError, field: string, base: string): string {
  const p = error.params;
  switch (error.keyword) {
    case 'additionalProperties':
      return unknownField(error, field, base);
    case 'required':
      return `${field} is a required field`;
    case 'type': {
      const type = String(p.type).split(',')[0];
      const article = type === 'integer' || type === 'object' || type === 'array' ? 'an' : 'a';
      return `${field} must be ${article} ${type}`;
    }
    case 'enum':
      return `${field} must be one of ${(p.allowedValues as unknown[]).filter((v) => v !== null).join(', ')}`;
    case 'maxLength':
      return `${field} must be at most ${p.limit} characters`;
    case 'minLength':
      return p.limit === 1 ? `${field} must not be empty` : `${field} must be at least ${p.limit} characters`;
    case 'maximum':
      return `${field} must be at most ${p.limit}`;
    case 'minimum':
      return `${field} must be at least ${p.limit}`;
    case 'exclusiveMinimum':
      return `${field} must be greater than ${p.limit}`;
    case 'maxItems':
      return `${field} must have at most ${p.limit} items`;
    case 'minItems':
      return `${field} must have at least ${p.limit} ${p.limit === 1 ? 'item' : 'items'}`;
    case 'uniqueItems': {
      // ajv names the two equal items as i and j, in either order depending on the item type.
      const [first, second] = [Number(p.i), Number(p.j)].sort((a, b) => a - b);
      return `${field} must not repeat an item (${field}[${first}] and ${field}[${second}] are the same)`;
    }
    case 'pattern':
      // A log cursor or an event id: what the pattern spells out, PostgreSQL's bigint range.
      return p.pattern === SEQ_PATTERN
        ? `${field} must be a whole number from 0 to 9223372036854775807`
        : `${field} is invalid`;
    case 'format':
      return p.format === 'uuid' ? `${field} must be a UUID` : `${field} must be a valid ${p.format}`;
    default:
      return `${field} is invalid`;
  }
}

export function fieldErrors(errors: AjvError[]): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const base = fieldPath(error.instancePath);
    const named =
      error.keyword === 'required'
        ? String(error.params.missingProperty)
        : error.keyword === 'additionalProperties'
          ? String(error.params.additionalProperty)
          : '';
    // An error about the body itself (a key with an empty name in it) is reported on `body`.
    const field = (named ? (base ? `${base}.${named}` : named) : base) || 'body';
    if (seen.has(field)) continue;
    seen.add(field);
    out.push({ field, error: describe(error, field, base) });
  }
  return out;
}

function resourceOfParams(errors: AjvError[]): string {
  const param = fieldPath(errors[0]?.instancePath ?? '');
  return RESOURCE_OF_PARAM[param] ?? 'Resource';
}

/** Fastify's errors and a route's attached validation error alike. */
type FrameworkError = Error &
  Partial<Pick<FastifyError, 'code' | 'validation'>> & { validationContext?: string };

export function toApiError(error: FrameworkError, request: FastifyRequest): ApiError | null {
  if (error instanceof ApiError) return error;
  const cause = error.code ? FASTIFY_BODY_CAUSES[error.code] : undefined;
  if (cause) return ValidationError.body(cause);
  if (error.validation) {
    if (error.validationContext === 'params')
      return new NotFoundError(resourceOfParams(error.validation as AjvError[]));
    const errors = error.validation as AjvError[];
    // The body itself is not an object; without a content type, none was sent (one with bytes but no
    // content type is refused before validation).
    if (errors.some((e) => e.instancePath === '' && e.keyword === 'type')) {
      const none = request.headers['content-type'] === undefined;
      return ValidationError.body(none ? BODY_CAUSES.missing : BODY_CAUSES.notObject);
    }
    return ValidationError.fields(fieldErrors(errors));
  }
  return null;
}

/**
 * For routes that validate with `attachValidation`: the body's field errors, to be reported together
 * with the domain's. Anything that is not a field error (the body is not an object) is thrown as is.
 */
export function attachedFieldErrors(request: FastifyRequest): FieldError[] {
  const error = request.validationError;
  if (!error) return [];
  const known = toApiError(error, request);
  if (known instanceof ValidationError && !(known instanceof UnreadableBodyError) && known.errors)
    return known.errors;
  throw known ?? error;
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = toApiError(error, request);
    if (known) {
      // The spec answers some broken business rules 500 `validation`: the client's mistake, not the
      // server's failure, so it is no error line with a stack (error lines are for operators to act on).
      if (known.status >= 500 && known.code === 'unknown') request.log.error({ err: error }, known.message);
      else if (known.status >= 500) request.log.info({ error_code: known.code }, known.message);
      // The spec fixes the body of a partial failure; the header names what was created, for a retry.
      if (known instanceof PartialFailureError) reply.header('x-berth-service-id', known.serviceId);
      return reply
        .status(known.status)
        .send({ error_code: known.code, message: known.message, errors: known.errors });
    }
    request.log.error({ err: error }, 'unexpected error');
    return reply.status(500).send({ error_code: 'unknown', message: UNKNOWN_MESSAGE, errors: null });
  });
  app.setNotFoundHandler((_request, reply) =>
    reply.status(404).send({ error_code: 'notfound', message: 'Route not found', errors: null }),
  );
}

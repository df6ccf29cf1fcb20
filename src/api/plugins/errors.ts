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
  UNKNOWN_MESSAGE,
  ValidationError,
} from '../../domain/errors.ts';
import { RESOURCE_OF_PARAM } from './scope.ts';

const BODY_ERROR_CODES = new Set([
  'FST_ERR_CTP_EMPTY_JSON_BODY',
  'FST_ERR_CTP_INVALID_MEDIA_TYPE',
  'FST_ERR_CTP_INVALID_CONTENT_LENGTH',
  'FST_ERR_CTP_BODY_TOO_LARGE',
  'FST_ERR_CTP_INVALID_JSON_BODY',
]);

interface AjvError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

/** `/secrets/2/key` -> `secrets[2].key` */
function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function describe(error: AjvError, field: string): string {
  const p = error.params;
  switch (error.keyword) {
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
      return `${field} must be at least ${p.limit} characters`;
    case 'maximum':
      return `${field} must be at most ${p.limit}`;
    case 'minimum':
      return `${field} must be at least ${p.limit}`;
    case 'exclusiveMinimum':
      return `${field} must be greater than ${p.limit}`;
    case 'maxItems':
      return `${field} must have at most ${p.limit} items`;
    case 'additionalProperties':
      return `unknown field "${field}"`;
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
    const missing =
      error.keyword === 'required'
        ? String(error.params.missingProperty)
        : error.keyword === 'additionalProperties'
          ? String(error.params.additionalProperty)
          : '';
    const field = missing ? (base ? `${base}.${missing}` : missing) : base;
    if (seen.has(field)) continue;
    seen.add(field);
    out.push({ field, error: describe(error, field) });
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

export function toApiError(error: FrameworkError): ApiError | null {
  if (error instanceof ApiError) return error;
  if (error.code && BODY_ERROR_CODES.has(error.code)) return ValidationError.body();
  if (error.validation) {
    if (error.validationContext === 'params')
      return new NotFoundError(resourceOfParams(error.validation as AjvError[]));
    const errors = error.validation as AjvError[];
    // The body itself is missing or is not an object.
    if (errors.some((e) => e.instancePath === '' && e.keyword === 'type')) return ValidationError.body();
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
  const known = toApiError(error);
  if (known instanceof ValidationError && known.errors) return known.errors;
  throw known ?? error;
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = toApiError(error);
    if (known) {
      if (known.status >= 500) request.log.error({ err: error }, known.message);
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

/**
 * The closed set of errors a caller can see. Each class fixes its status and error_code here and nowhere
 * else; the API's error handler only reads these fields.
 */
export interface FieldError {
  field: string;
  error: string;
}

export const ERROR_CODES = [
  'unauthorized',
  'forbidden',
  'notfound',
  'conflict',
  'validation',
  'rate_limited',
  'unknown',
  'DOMAIN_VERIFICATION_FAILED',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export abstract class ApiError extends Error {
  abstract readonly status: number;
  abstract readonly code: ErrorCode;
  readonly errors: FieldError[] | null = null;
}

export class UnauthorizedError extends ApiError {
  readonly status = 401;
  readonly code = 'unauthorized';
  constructor(message = 'You are not authorized to do this action') {
    super(message);
  }
}

export class ForbiddenError extends ApiError {
  readonly status = 403;
  readonly code = 'forbidden';
}

export class NotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'notfound';
  constructor(resource: string) {
    super(`${resource} not found`);
  }
}

export class ConflictError extends ApiError {
  readonly status = 409;
  readonly code = 'conflict';
}

/** 412: a conditional write (If-Match) whose resource changed since the client read it; `conflict`-shaped. */
export class PreconditionFailedError extends ApiError {
  readonly status = 412;
  readonly code = 'conflict';
}

/** 422: a field rule failed, or the body is not a JSON object. */
export class ValidationError extends ApiError {
  readonly status = 422;
  readonly code = 'validation';
  override readonly errors: FieldError[] | null;
  constructor(message: string, errors: FieldError[] | null) {
    super(message);
    this.errors = errors;
  }
  static fields(errors: FieldError[]): ValidationError {
    return new ValidationError('Invalid data', errors);
  }
  static body(cause: string): ValidationError {
    return new UnreadableBodyError(cause);
  }
}

/** The body cannot be read: the spec's message, and the cause as a `body` field error. */
export class UnreadableBodyError extends ValidationError {
  constructor(cause: string) {
    super('Please check your request body', [{ field: 'body', error: cause }]);
  }
}

/** 500 `validation`: the spec answers some business-rule violations this way. */
export class BusinessRuleError extends ApiError {
  readonly status = 500;
  readonly code = 'validation';
}

export class DomainVerificationError extends ApiError {
  readonly status = 422;
  readonly code = 'DOMAIN_VERIFICATION_FAILED';
  override readonly errors: FieldError[];
  constructor(errors: FieldError[]) {
    super('The DNS records of the domain do not match the expected values');
    this.errors = errors;
  }
}

/** 500 `unknown` with a chosen message; the spec uses it when a service is created but its deploy fails. */
/** 500: the request did part of its work (the service was created); `serviceId` names what exists. */
export class PartialFailureError extends ApiError {
  readonly status = 500;
  readonly code = 'unknown';
  readonly serviceId: string;
  constructor(message: string, created: { serviceId: string }) {
    super(message);
    this.serviceId = created.serviceId;
  }
}

export class RateLimitedError extends ApiError {
  readonly status = 429;
  readonly code = 'rate_limited';
}

export const UNKNOWN_MESSAGE = 'Something went wrong. Please try again later';

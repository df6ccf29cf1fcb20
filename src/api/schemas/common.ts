import { type TArray, type TSchema, Type } from 'typebox';
import { ERROR_CODES } from '../../domain/errors.ts';
import { CLOSED, Nullable, ReadOnly, StringEnum, Uuid, ZERO_UUID } from '../../domain/schema-types.ts';

export { CLOSED, Nullable, ReadOnly, StringEnum, Uuid, ZERO_UUID };

/** Shared schema pieces. Every string has a maximum length; every response is a deliberate projection. */
export const DateTime = Type.String({ format: 'date-time', maxLength: 40 });

export function Envelope<T extends TSchema>(data: T) {
  return Type.Object({ message: Type.Literal('success'), data });
}

export const FieldErrorSchema = Type.Object({
  field: Type.String({ maxLength: 300 }),
  error: Type.String({ maxLength: 1000 }),
});

export const ErrorBody = Type.Object(
  {
    error_code: StringEnum(ERROR_CODES, {
      maxLength: 40,
      description:
        'unauthorized, forbidden, notfound, conflict, validation, rate_limited, unknown or DOMAIN_VERIFICATION_FAILED',
    }),
    message: Type.String({ maxLength: 1000 }),
    errors: Nullable(Type.Array(FieldErrorSchema, { maxItems: 200 })),
  },
  { $id: 'ErrorBody' },
);

const errorRef = Type.Ref('ErrorBody');

/** Error responses, referenced so that OpenAPI lists them and serialization keeps their shape. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((s) => [s, errorRef]));
}

/** The responses every authenticated /v1 route can give besides its own. */
export const AUTH_ERRORS = [401, 403, 404, 429, 500] as const;

/**
 * Decimal text of 0 to `max`, leading zeros allowed, as one pattern: the digits up to the first one
 * below max's, then any digits. A validator can then refuse a value past the bound with the rest.
 */
function atMostPattern(max: string): string {
  const longest = max.length;
  const below = [...max].flatMap((digit, i) =>
    digit === '0' ? [] : [`${max.slice(0, i)}[0-${Number(digit) - 1}][0-9]{${longest - i - 1}}`],
  );
  return `^(?:[0-9]{1,${longest - 1}}|${[...below, max].join('|')})$`;
}

/**
 * An event id or a log cursor: a PostgreSQL bigint sequence number, so at most 2^63 - 1. A larger one
 * is a field error, never a query that fails.
 */
export const SEQ_PATTERN = atMostPattern('9223372036854775807');
const SEQ = new RegExp(SEQ_PATTERN);
export const isSeq = (text: string): boolean => SEQ.test(text);
export const Seq = (description: string) => Type.String({ pattern: SEQ_PATTERN, maxLength: 19, description });

export const EnvIdParams = Type.Object({ envId: Uuid });
export const ServiceParams = Type.Object({ envId: Uuid, serviceId: Uuid });

/** Query strings are validated like bodies: declared parameters only, each given once (body-guards.ts). */
export const PageQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
  },
  { additionalProperties: false },
);

/**
 * A list that is not paged takes no query parameter: `?limit=1` there is a field error (unknown field),
 * not a whole list answered as if it were a page.
 */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/** A paged list's response: `{message, data: {<key>: [...], next_cursor}}`. */
export function PagedList<const K extends string, T extends TSchema>(key: K, item: T) {
  const items = { [key]: Type.Array(item) } as Record<K, TArray<T>>;
  return Envelope(Type.Object({ ...items, next_cursor: Nullable(Type.String({ maxLength: 200 })) }));
}

/** A paged list route's query and answers: `PageQuery` in, `PagedList` out, and a bad cursor's 422. */
export function pagedListSchema<const K extends string, T extends TSchema>(key: K, item: T) {
  return {
    querystring: PageQuery,
    response: { 200: PagedList(key, item), ...errorResponses(...AUTH_ERRORS, 422) },
  };
}

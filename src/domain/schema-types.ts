/**
 * Schema pieces the domain's declarations share with the API's: a field declared once in domain/ is
 * the same JSON Schema the API validates and documents.
 * @module
 */
import { type Static, type TSchema, Type } from 'typebox';

export const Uuid = Type.String({ format: 'uuid', maxLength: 36 });
/** The spec's id for "none" where a field is a uuid that is never null. */
export const ZERO_UUID = '00000000-0000-0000-0000-000000000000';

/** A JSON Schema type that also admits null (OpenAPI 3.1 style `type: [T, "null"]`). */
export function Nullable<T extends TSchema>(schema: T) {
  const { type, enum: values, ...rest }: Record<string, unknown> = Object.fromEntries(Object.entries(schema));
  // An enum must admit null itself: `type` alone would let validation refuse it.
  const nullableEnum = Array.isArray(values) ? { enum: [...values, null] } : {};
  return Type.Unsafe<Static<T> | null>({ ...rest, ...nullableEnum, type: [type, 'null'] });
}

/** A string enum with a `type`, so that it can be made nullable and reads well in OpenAPI. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: Record<string, unknown> = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/**
 * Request bodies refuse fields they do not declare (a typo must never do something else silently):
 * every body object is `additionalProperties: false`, and the refusal names the field (plugins/errors.ts).
 */
export const CLOSED = { additionalProperties: false } as const;

/**
 * A read-only field of the resource, accepted in a request body and ignored, so that a client can send
 * back what it read (read-modify-write). Never suggested for a misspelled field.
 */
export const ReadOnly = (description: string) => Type.Optional(Type.Unknown({ readOnly: true, description }));

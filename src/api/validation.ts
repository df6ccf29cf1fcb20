import SerializerSelector from '@fastify/fast-json-stringify-compiler';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

/**
 * Two validators: bodies are checked as sent (no type coercion, every error reported, with the schema
 * and data beside each error so that an unknown field can be matched to a known one), while path and
 * query strings are text by nature and are coerced to the declared types.
 */
function makeAjv(coerce: boolean) {
  const ajv = new Ajv({
    allErrors: !coerce,
    verbose: true,
    coerceTypes: coerce,
    useDefaults: coerce,
    removeAdditional: false,
    strict: false,
  });
  addFormats.default(ajv);
  return ajv;
}

const bodyAjv = makeAjv(false);
const textAjv = makeAjv(true);

/**
 * Compiled on a route's first request, not at start: compiling the ~100 routes' validators and
 * serializers was about a fifth of a start's CPU (and a route a client never calls is never compiled).
 * Fastify reads a failed validation's `errors` from the function it was given.
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  let compiled: ValidateFunction | undefined;
  const validate = Object.assign(
    (data: unknown) => {
      compiled ??= (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object);
      const valid = compiled(data);
      validate.errors = compiled.errors;
      return valid;
    },
    { errors: null as ErrorObject[] | null | undefined },
  );
  return validate as ReturnType<FastifySchemaCompiler<unknown>>;
};

const buildSerializers = SerializerSelector();

/** Fastify's own response serializers (fast-json-stringify), each built on its first use. */
export const lazySerializers: typeof buildSerializers = (externalSchemas, options) => {
  const compile = buildSerializers(externalSchemas, options);
  return (route) => {
    let serialize: ((doc: unknown) => string) | undefined;
    return (doc) => {
      serialize ??= compile(route);
      return serialize(doc);
    };
  };
};

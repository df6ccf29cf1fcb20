import { Ajv } from 'ajv';
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

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object) as ReturnType<
    FastifySchemaCompiler<unknown>
  >;

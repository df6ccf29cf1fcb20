/**
 * Shape errors (types, lengths, ranges: from the route schema) and rule errors (from the domain) of one
 * request, reported together: one error per field, the shape error winning, in the order of the spec's
 * Create Service table.
 * @module
 */
import type { FieldError } from './errors.ts';
import { SPEC_FIELDS } from './service-fields.ts';

const ORDER: readonly string[] = [...SPEC_FIELDS, 'deploy_now', 'secrets', 'subdomain'];
const rootOf = (field: string) => field.split(/[.[]/)[0] ?? field;
const rank = (field: string) => {
  const i = ORDER.indexOf(rootOf(field));
  return i === -1 ? ORDER.length : i;
};

export function mergeFieldErrors(shape: FieldError[], rules: FieldError[]): FieldError[] {
  const shaped = new Set(shape.map((e) => rootOf(e.field)));
  const merged = [...shape, ...rules.filter((e) => !shaped.has(rootOf(e.field)))];
  return merged
    .map((e, i) => ({ e, i }))
    .sort((a, b) => rank(a.e.field) - rank(b.e.field) || a.i - b.i)
    .map(({ e }) => e);
}

/** The body without the fields whose shape is wrong, so the rules judge only what they can read. */
export function withoutFields<T extends object>(body: T, errors: FieldError[]): T {
  const out = { ...body } as Record<string, unknown>;
  for (const e of errors) delete out[rootOf(e.field)];
  return out as T;
}

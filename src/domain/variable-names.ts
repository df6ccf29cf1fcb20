/**
 * What may name an environment variable of a service: a POSIX name (letters, digits and underscores,
 * not starting with a digit). Anything else cannot reach a process intact: `A=B` would become variable
 * `A` with value `B=...`, and `__proto__` is lost by any plain-object lookup on the way.
 */
export const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const VARIABLE_NAME_RULE =
  'must be an environment variable name: letters, digits and underscores, not starting with a digit';

export function isVariableName(name: string): boolean {
  return VARIABLE_NAME.test(name);
}

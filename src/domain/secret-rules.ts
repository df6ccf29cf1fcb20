import type { FieldError } from './errors.ts';
import type { SecretEntry } from './inputs.ts';
import { isVariableName, VARIABLE_NAME_RULE } from './variable-names.ts';

export type { SecretEntry };

/**
 * Field errors of a secrets array, and the first repeated key (reported as `Duplicate secret key: <key>`).
 * A key is non-empty after trimming (the spec) and names an environment variable, since that is what
 * it becomes.
 */
export function checkSecrets(
  entries: SecretEntry[],
  field: string,
): { errors: FieldError[]; duplicate: string | null } {
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  let duplicate: string | null = null;
  entries.forEach((entry, i) => {
    const key = entry.key.trim();
    const at = `${field}[${i}].key`;
    if (!key) errors.push({ field: at, error: `${at} must not be empty` });
    else if (!isVariableName(key)) errors.push({ field: at, error: `${at} ${VARIABLE_NAME_RULE}` });
    else if (seen.has(key)) duplicate ??= key;
    seen.add(key);
  });
  return { errors, duplicate };
}

export interface StoredSecret {
  key: string;
  value: string;
  is_sensitive: boolean;
  description: string;
  use_preview: boolean;
  expose_to_chart: boolean | null;
  chart_default_val: string | null;
  dep_export: boolean | null;
  updated_at: Date;
}

/**
 * The full replace: the new set is exactly the entries sent. An entry without `value` for a key that is
 * stored as sensitive keeps the stored value, and stays sensitive (so nobody can reveal a value they
 * never knew by flipping the flag). An entry that changes nothing keeps its updated_at.
 */
export function mergeSecrets(current: StoredSecret[], entries: SecretEntry[], now: Date): StoredSecret[] {
  const byKey = new Map(current.map((s) => [s.key, s]));
  return entries.map((entry) => {
    const key = entry.key.trim();
    const old = byKey.get(key);
    const keep = entry.value === undefined && old?.is_sensitive === true;
    const next: StoredSecret = {
      key,
      value: keep ? (old as StoredSecret).value : (entry.value ?? ''),
      is_sensitive: keep ? true : (entry.is_sensitive ?? false),
      description: entry.description ?? '',
      use_preview: entry.use_preview ?? false,
      expose_to_chart: entry.expose_to_chart ?? null,
      chart_default_val: entry.chart_default_val ?? null,
      dep_export: entry.dep_export ?? null,
      updated_at: now,
    };
    return old && sameSecret(old, next) ? { ...next, updated_at: old.updated_at } : next;
  });
}

/**
 * Entries marked sensitive without a `value` that have no stored sensitive value to keep: stored as
 * they were, each would be an empty value nobody can read back (a misspelt key, or a plain key being
 * made sensitive), so each is a field error on its `value` instead.
 */
export function missingSensitiveValues(
  current: StoredSecret[],
  entries: SecretEntry[],
  field: string,
): FieldError[] {
  const sensitive = new Set(current.filter((s) => s.is_sensitive).map((s) => s.key));
  return entries.flatMap((entry, i) => {
    const key = entry.key.trim();
    if (entry.value !== undefined || entry.is_sensitive !== true || sensitive.has(key)) return [];
    const at = `${field}[${i}].value`;
    const why = current.some((s) => s.key === key)
      ? `${key} is stored as not sensitive, so there is no hidden value to keep`
      : `${key} has no stored value to keep`;
    return [{ field: at, error: `${at} is required for a sensitive secret: ${why}` }];
  });
}

/** Equal in everything but when it was written. */
function sameSecret(a: StoredSecret, b: StoredSecret): boolean {
  return (Object.keys(b) as (keyof StoredSecret)[]).every((k) => k === 'updated_at' || a[k] === b[k]);
}

export interface SecretChanges {
  created: StoredSecret[];
  updated: StoredSecret[];
  /** As they were stored. */
  deleted: StoredSecret[];
}

/** What a full replace from `current` to `next` changes, key by key; a key left as it was is in none. */
export function secretChanges(current: StoredSecret[], next: StoredSecret[]): SecretChanges {
  const before = new Map(current.map((s) => [s.key, s]));
  const after = new Set(next.map((s) => s.key));
  const changes: SecretChanges = { created: [], updated: [], deleted: [] };
  for (const secret of next) {
    const old = before.get(secret.key);
    if (!old) changes.created.push(secret);
    else if (!sameSecret(old, secret)) changes.updated.push(secret);
  }
  changes.deleted = current.filter((s) => !after.has(s.key));
  return changes;
}

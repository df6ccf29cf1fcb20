import type { Db } from '../../store/database.ts';
import { lockEnvironment } from '../../store/repositories/environments.ts';
import { enqueue, type JobKind } from '../../store/repositories/jobs.ts';
import { changeSecrets, listSecrets, listSecretsOf } from '../../store/repositories/secrets.ts';
import type { DeploymentRow, SecretRow } from '../../store/schema.ts';
import type { SecretBox } from '../../store/secret-box.ts';
import { ValidationError } from '../errors.ts';
import {
  checkSecrets,
  mergeSecrets,
  missingSensitiveValues,
  type SecretEntry,
  type StoredSecret,
  secretChanges,
} from '../secret-rules.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { lockLiveService } from './service-guards.ts';

export interface SecretScope {
  scope: 'service' | 'environment';
  id: string;
  environmentId: string;
  accountId: string;
}

/** The job that writes a scope's secrets to the provider: its kind carries the scope. */
export const SECRETS_JOB = {
  service: 'write_service_secrets',
  environment: 'write_environment_secrets',
} as const satisfies Record<SecretScope['scope'], JobKind>;

/** Validates everything first: one bad entry and nothing is written. */
export function assertValidSecrets(entries: SecretEntry[], field: string): void {
  const { errors, duplicate } = checkSecrets(entries, field);
  if (errors.length > 0) throw ValidationError.fields(errors);
  if (duplicate !== null) {
    const index = entries.findIndex((e, i) => entries.findIndex((o) => o.key.trim() === e.key.trim()) !== i);
    throw new ValidationError(`Duplicate secret key: ${duplicate}`, [
      { field: `${field}[${index}].key`, error: `Duplicate secret key: ${duplicate}` },
    ]);
  }
}

export async function readSecrets(db: Db, box: SecretBox, scopeId: string): Promise<StoredSecret[]> {
  const rows = await listSecrets(db, scopeId);
  return rows.map(({ value_sealed, scope: _scope, scope_id: _id, ...rest }) => ({
    ...rest,
    value: box.open(value_sealed),
  }));
}

/** Replaces a scope's secrets inside `trx` and queues their write to the provider. */
export async function storeSecrets(
  trx: Db,
  box: SecretBox,
  target: SecretScope,
  entries: SecretEntry[],
): Promise<StoredSecret[]> {
  const current = await readSecrets(trx, box, target.id);
  const missing = missingSensitiveValues(current, entries, 'secrets');
  if (missing.length > 0) throw ValidationError.fields(missing);
  const next = mergeSecrets(current, entries, new Date()).sort((a, b) =>
    a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
  );
  const { created, updated, deleted } = secretChanges(current, next);
  await changeSecrets(
    trx,
    target.id,
    deleted.map((s) => s.key),
    [...created, ...updated].map(({ value, ...rest }) => ({
      ...rest,
      scope: target.scope,
      scope_id: target.id,
      value_sealed: box.seal(value),
    })),
  );
  await enqueue(trx, {
    kind: SECRETS_JOB[target.scope],
    subjectId: target.id,
    accountId: target.accountId,
    queueKey: target.id,
  });
  return next;
}

export async function getSecrets(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  target: SecretScope,
): Promise<StoredSecret[]> {
  return readSecrets(deps.store.db, deps.secretBox, target.id);
}

export async function putSecrets(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  actor: Actor,
  target: SecretScope,
  entries: SecretEntry[],
  /** A conditional write's check (If-Match), given the secrets as they are under the lock. */
  precondition?: (current: StoredSecret[]) => void,
): Promise<StoredSecret[]> {
  assertValidSecrets(entries, 'secrets');
  return deps.store.db.transaction().execute(async (trx) => {
    // The scope's row lock makes concurrent replaces take turns (each one whole), and a service whose
    // delete was accepted meanwhile refuses.
    if (target.scope === 'service') {
      await lockLiveService(trx, target.id);
    } else {
      await lockEnvironment(trx, target.id);
    }
    precondition?.(await readSecrets(trx, deps.secretBox, target.id));
    const stored = await storeSecrets(trx, deps.secretBox, target, entries);
    await recordAudit(trx, actor, `${target.scope}.secrets.replace`, {
      id: target.id,
      environmentId: target.environmentId,
    });
    return stored;
  });
}

/** The variables a service runs with: the environment's secrets overlaid by the service's own. */
export async function effectiveSecrets(db: Db, box: SecretBox, environmentId: string, serviceId: string) {
  return variablesOf(await listSecretsOf(db, [environmentId, serviceId]), box, environmentId, serviceId);
}

/** effectiveSecrets from the two scopes' rows already read (a deploy run's one read). */
export function variablesOf(
  rows: ReadonlyArray<Pick<SecretRow, 'scope_id' | 'key' | 'value_sealed'>>,
  box: SecretBox,
  environmentId: string,
  serviceId: string,
): Record<string, string> {
  const of = (scopeId: string) =>
    rows
      .filter((row) => row.scope_id === scopeId)
      .map((row): [string, string] => [row.key, box.open(row.value_sealed)]);
  // Built by definition, never by assignment: a key such as `__proto__` (a valid variable name) is
  // then an ordinary entry rather than a prototype change. Later entries (the service's) win.
  return Object.fromEntries([...of(environmentId), ...of(serviceId)]);
}

/**
 * Every secret value a deployment's texts must not show (redact.ts masks them): the service's secrets
 * now (`rows`, when already read) and, for a deployment that recorded what it runs with (a rollback or
 * restart copies that), those.
 */
export async function maskedValuesOf(
  db: Db,
  box: SecretBox,
  deployment: Pick<DeploymentRow, 'environment_id' | 'service_id' | 'variables_sealed'>,
  rows?: SecretRow[],
): Promise<string[]> {
  const { environment_id, service_id } = deployment;
  const current = Object.values(
    rows
      ? variablesOf(rows, box, environment_id, service_id)
      : await effectiveSecrets(db, box, environment_id, service_id),
  );
  if (!deployment.variables_sealed) return current;
  const recorded = JSON.parse(box.open(deployment.variables_sealed)) as Record<string, string>;
  return [...current, ...Object.values(recorded)];
}

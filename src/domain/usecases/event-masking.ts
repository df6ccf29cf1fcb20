import type { Db } from '../../store/database.ts';
import { listSecretsOf } from '../../store/repositories/secrets.ts';
import type { EventRow } from '../../store/schema.ts';
import type { SecretBox } from '../../store/secret-box.ts';
import { redactor } from '../redact.ts';

/**
 * Events as they may be shown: a deployment event's target is stored as given (the deployment must run
 * it), so a secret value typed into it is masked on the way out, in the event stream and in webhook
 * payloads, with the service's secrets, as logs mask it. Notes, failure reasons and commit texts are
 * masked before they are stored (usecases/deployments.ts, git-events.ts). One read of the secrets of
 * every service the batch names.
 */
export async function maskedEvents(db: Db, box: SecretBox, rows: EventRow[]): Promise<EventRow[]> {
  const scopes = new Map<EventRow, [string, string]>();
  for (const row of rows) {
    const data = row.data as Record<string, unknown>;
    if (!row.type.startsWith('deployment.')) continue;
    if (typeof data.environment_id !== 'string' || typeof data.service_id !== 'string') continue;
    scopes.set(row, [data.environment_id, data.service_id]);
  }
  if (scopes.size === 0) return rows;
  const secrets = await listSecretsOf(db, [...new Set([...scopes.values()].flat())]);
  const valuesOf = new Map<string, string[]>();
  for (const secret of secrets) {
    const values = valuesOf.get(secret.scope_id) ?? [];
    values.push(box.open(secret.value_sealed));
    valuesOf.set(secret.scope_id, values);
  }
  const masks = new Map<string, (text: string) => string>();
  const maskOf = ([environmentId, serviceId]: [string, string]) => {
    const key = `${environmentId}/${serviceId}`;
    let mask = masks.get(key);
    if (!mask) {
      mask = redactor([...(valuesOf.get(environmentId) ?? []), ...(valuesOf.get(serviceId) ?? [])]);
      masks.set(key, mask);
    }
    return mask;
  };
  return rows.map((row) => {
    const scope = scopes.get(row);
    if (!scope) return row;
    const mask = maskOf(scope);
    const data = Object.fromEntries(
      Object.entries(row.data as Record<string, unknown>).map(([key, value]) => [
        key,
        typeof value === 'string' ? mask(value) : value,
      ]),
    );
    return { ...row, data };
  });
}

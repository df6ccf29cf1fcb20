import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { heldDomain } from '../../store/repositories/custom-domains.ts';
import { transitionDeployment, unfinishedDeployments } from '../../store/repositories/deployments.ts';
import { dropJobs, enqueue } from '../../store/repositories/jobs.ts';
import { insertService, subdomainTaken, updateService } from '../../store/repositories/services.ts';
import type { EnvironmentRow, ServiceRow } from '../../store/schema.ts';
import { checkTypeKeepsDomain } from '../custom-domain-rules.ts';
import {
  BusinessRuleError,
  ConflictError,
  type FieldError,
  PartialFailureError,
  ValidationError,
} from '../errors.ts';
import { mergeFieldErrors } from '../field-errors.ts';
import { registryErrors } from '../registries.ts';
import type { SecretEntry } from '../secret-rules.ts';
import { checkSecrets, missingSensitiveValues } from '../secret-rules.ts';
import type { SpecInput } from '../service-fields.ts';
import { businessRuleViolation, checkCreate, checkPatch } from '../service-rules.ts';
import { generateSubdomain, kubeSecretNames } from '../subdomain.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { acceptDeployment } from './deployments.ts';
import { assertConnection } from './git-connections.ts';
import { assertValidSecrets, storeSecrets } from './secrets.ts';
import { assertNotDeleting, lockLiveService, lockService, moveLiveService } from './service-guards.ts';

export type CreateServiceBody = SpecInput & {
  deploy_now?: boolean;
  secrets?: SecretEntry[];
  subdomain?: unknown;
};

export const DEPLOY_FAILED_MESSAGE = 'Service created successfully, but failed to deploy the service';

async function uniqueSubdomain(db: Db, name: string): Promise<string> {
  // 36^8 ids per prefix: a repeat is rare, ten in a row is not going to happen.
  for (let i = 0; i < 10; i++) {
    const candidate = generateSubdomain(name);
    if (!(await subdomainTaken(db, candidate))) return candidate;
  }
  throw new Error('could not find a free subdomain');
}

/**
 * Create Service. Shape errors were answered by the route; here: the spec's conditional rules (422),
 * then its business rules (500 `validation`), then the environment's state (409). A first deployment
 * (deploy_now) is accepted in the same transaction as the service, so neither exists without the other;
 * when the provider refuses it at once the service is kept, `deploy_failed` with a failed deployment that
 * records the reason, and the call answers 500 (rule 4) naming the service (see PartialFailureError).
 */
export async function createService(
  deps: Pick<Deps, 'store' | 'provider' | 'secretBox' | 'logger' | 'config'>,
  actor: Actor,
  env: EnvironmentRow,
  body: CreateServiceBody,
  shapeErrors: FieldError[] = [],
) {
  const { spec, errors } = checkCreate(body);
  const secrets = body.secrets ?? [];
  const rules: FieldError[] = [
    ...errors,
    ...registryErrors(spec, deps.config.allowedRegistries),
    ...checkSecrets(secrets, 'secrets').errors,
    ...missingSensitiveValues([], secrets, 'secrets'),
  ];
  if (body.subdomain !== undefined) rules.push({ field: 'subdomain', error: 'subdomain cannot be supplied' });
  const all = mergeFieldErrors(shapeErrors, rules);
  if (all.length > 0) throw ValidationError.fields(all);
  assertValidSecrets(secrets, 'secrets');
  const violation = businessRuleViolation(spec);
  if (violation) throw new BusinessRuleError(violation);
  if (env.state !== 'available') {
    throw new ConflictError(
      `Environment is not available (its state is ${env.state}); create services once it is`,
    );
  }

  const id = randomUUID();
  // Before the subdomain is chosen: an admission check judges what runs, not where it is served.
  const draft = { ...spec, id, account_id: env.account_id, environment_id: env.id, subdomain: '' };
  const refusal = body.deploy_now ? (deps.provider.admission?.refusal(draft) ?? null) : null;
  const service = await deps.store.db.transaction().execute(async (trx) => {
    await assertConnection(trx, { ...spec, account_id: env.account_id });
    const subdomain = await uniqueSubdomain(trx, spec.name);
    const created = await insertService(trx, {
      ...spec,
      id,
      account_id: env.account_id,
      environment_id: env.id,
      gitlab_connection_id: spec.source === 'gitlab' ? spec.installation_id : null,
      state: 'deploy_pending',
      is_deleted: false,
      is_preview: false,
      subdomain,
      ...kubeSecretNames(subdomain),
    });
    if (secrets.length > 0) {
      const scope = { scope: 'service', id, environmentId: env.id, accountId: env.account_id } as const;
      await storeSecrets(trx, deps.secretBox, scope, secrets);
    }
    await recordAudit(trx, actor, 'service.create', { id, environmentId: env.id });
    if (body.deploy_now) await acceptDeployment(trx, deps.secretBox, id, {}, { refusal });
    // The spec: the create response shows `deploy_pending`, also when deploy_now queued a deployment.
    return created;
  });
  if (refusal) {
    deps.logger.warn({ service: id, reason: refusal }, 'deploy_now refused by the provider');
    throw new PartialFailureError(DEPLOY_FAILED_MESSAGE, { serviceId: id });
  }
  return service;
}

/**
 * PATCH merges onto the row as locked inside the transaction, never onto the one the request loaded:
 * two concurrent PATCHes of one service then apply one after the other and neither loses the other's
 * fields. Errors keep the contract's order: field errors (422), a delete under way (403), rule 5 (500).
 */
export async function patchService(
  deps: Pick<Deps, 'store' | 'provider' | 'secretBox' | 'logger' | 'config'>,
  actor: Actor,
  service: ServiceRow,
  body: SpecInput,
  shapeErrors: FieldError[] = [],
  /** A conditional write's check (If-Match), given the service as it is under the lock. */
  precondition?: (current: ServiceRow) => void,
) {
  return deps.store.db.transaction().execute(async (trx) => {
    const current = await lockService(trx, service.id);
    precondition?.(current);
    const { spec, errors } = checkPatch(current, body);
    // Under the row lock: a domain added meanwhile waits for this PATCH, and sees its type.
    const held = spec.type === current.type ? undefined : await heldDomain(trx, service.id);
    const keeps = checkTypeKeepsDomain(spec.type, held?.domain ?? null);
    const all = mergeFieldErrors(shapeErrors, [
      ...errors,
      ...(keeps ? [keeps] : []),
      ...registryErrors(spec, deps.config.allowedRegistries),
    ]);
    if (all.length > 0) throw ValidationError.fields(all);
    assertNotDeleting(current);
    await assertConnection(trx, { ...spec, account_id: current.account_id });
    const violation = businessRuleViolation(spec);
    if (violation) throw new BusinessRuleError(violation);
    const updated = await updateService(trx, service.id, {
      ...spec,
      gitlab_connection_id: spec.source === 'gitlab' ? spec.installation_id : null,
    });
    await recordAudit(trx, actor, 'service.update', {
      id: service.id,
      environmentId: service.environment_id,
    });
    return updated;
  });
}

/**
 * Delete: 409 for a protected service, 403 when a delete is already under way. Deployments not yet
 * started are cancelled (failed, with the reason); one in progress finishes first, then the teardown
 * job runs, since jobs of one service run in order.
 */
export async function deleteService(
  deps: Pick<Deps, 'store' | 'provider' | 'secretBox' | 'logger'>,
  actor: Actor,
  service: ServiceRow,
): Promise<void> {
  assertNotDeleting(service);
  if (service.is_protected)
    throw new ConflictError('Cannot delete a protected service. Remove protection first.');
  await deps.store.db.transaction().execute((trx) => deleteServiceIn(trx, actor, service));
}

/** The delete inside the caller's transaction (a closed pull request deletes its preview with the delivery). */
export async function deleteServiceIn(trx: Db, actor: Actor, service: ServiceRow): Promise<void> {
  const locked = await lockLiveService(trx, service.id);
  if (locked.is_protected)
    throw new ConflictError('Cannot delete a protected service. Remove protection first.');
  const queued = await unfinishedDeployments(trx, service.id, ['queued']);
  for (const d of queued) {
    await transitionDeployment(trx, d.id, ['queued'], 'failed', {
      failure_reason: 'Cancelled: the service was deleted before this deployment started',
    });
  }
  await dropJobs(
    trx,
    'deploy',
    queued.map((d) => d.id),
  );
  await moveLiveService(trx, service.id, 'delete_pending');
  await enqueue(trx, {
    kind: 'delete_service',
    subjectId: service.id,
    accountId: service.account_id,
    queueKey: service.id,
  });
  await recordAudit(trx, actor, 'service.delete', {
    id: service.id,
    environmentId: service.environment_id,
  });
}

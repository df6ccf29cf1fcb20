import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { appendDeploymentLog } from '../../store/repositories/deployment-logs.ts';
import { insertDeployment } from '../../store/repositories/deployments.ts';
import { enqueueAtCommit } from '../../store/repositories/jobs.ts';
import type { DeploymentRow, ServiceRow } from '../../store/schema.ts';
import type { SecretBox } from '../../store/secret-box.ts';
import type { DeploymentType } from '../deployment-states.ts';
import { type FieldError, ValidationError } from '../errors.ts';
import type { DeployBody } from '../inputs.ts';
import { redactor } from '../redact.ts';
import { registryErrors } from '../registries.ts';
import type { Source } from '../service-fields.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { maskedValuesOf } from './secrets.ts';
import { assertNotDeleting, lockLiveService, lockService, moveLiveService } from './service-guards.ts';

const TARGET_SOURCES: Record<'commit_id' | 'docker_image_tag' | 'helm_chart_version', readonly Source[]> = {
  commit_id: ['github', 'gitlab'],
  docker_image_tag: ['docker_image'],
  helm_chart_version: ['helm_chart'],
};

/** A commit, tag or chart version is one word. */
export function targetValueError(field: string, value: string): string | null {
  return /^\S+$/.test(value) ? null : `${field} must be a non-empty value without spaces`;
}

/** At most one target, and it must fit the service's source. */
export function checkDeployTarget(body: DeployBody, source: string): FieldError[] {
  const errors: FieldError[] = [];
  const given = (Object.keys(TARGET_SOURCES) as (keyof typeof TARGET_SOURCES)[]).filter(
    (k) => body[k] !== undefined,
  );
  for (const field of given) {
    if (!TARGET_SOURCES[field].includes(source as Source)) {
      errors.push({ field, error: `${field} does not fit a service whose source is ${source}` });
    } else {
      const error = targetValueError(field, body[field] as string);
      if (error) errors.push({ field, error });
    }
  }
  if (given.length > 1 && errors.length === 0) {
    errors.push({
      field: given[1] as string,
      error: 'give at most one of commit_id, docker_image_tag and helm_chart_version',
    });
  }
  // A pull request's fields outside preview mode: `{branch: "feat"}` would deploy the configured branch.
  for (const field of ['branch', 'pr_number'] as const) {
    if (body[field] !== undefined)
      errors.push({ field, error: `${field} is only for a preview deployment (preview: true)` });
  }
  return errors;
}

export interface AcceptOptions {
  /** The provider refused the deployment at once, for this reason. */
  refusal?: string | null;
  /** The service row, already locked by the caller in `trx`. */
  locked?: ServiceRow;
  /**
   * A rollback (type `restore`) or a restart (`service_update`: the contract reserves `restore` for
   * rollbacks): the deployment whose target, ops config and variables it runs again.
   */
  copy?: { type: DeploymentType; of: DeploymentRow };
}

/**
 * Accepts a deployment inside `trx`: the service row is locked first, so deployments of one service get
 * their creation times, their jobs and their prev_deployment_id in the order they were accepted. The
 * caller writes the call's one audit entry. A deployment the provider refused at once (`refusal`) is
 * recorded `failed` with the reason and nothing is queued; the service goes `deploy_failed`. The note
 * and the reason are stored with secret values masked, as the log lines are: what the event triggers
 * copy from the row is masked too.
 */
export async function acceptDeployment(
  trx: Db,
  box: SecretBox,
  serviceId: string,
  body: DeployBody,
  options: AcceptOptions = {},
): Promise<DeploymentRow> {
  const { refusal = null, copy } = options;
  // A caller that already locked the row (to check it) hands it over: one lock, one statement.
  const service = options.locked ?? (await lockService(trx, serviceId));
  const target = copy
    ? {
        // What the earlier deployment resolved and ran with: its commit, tag or chart, ops and variables.
        git_commit_ref: copy.of.git_commit_ref,
        docker_image_tag: copy.of.docker_image_tag,
        helm_chart_version: copy.of.helm_chart_version,
        helm_values_yml: copy.of.helm_values_yml,
        ops_snapshot: copy.of.ops_snapshot,
        variables_sealed: copy.of.variables_sealed,
        restored_from: copy.of.id,
      }
    : {
        git_commit_ref: body.commit_id ?? '',
        docker_image_tag: service.source === 'docker_image' ? (body.docker_image_tag ?? 'latest') : '',
        helm_chart_version: body.helm_chart_version ?? '',
        helm_values_yml: service.source === 'helm_chart' ? (service.helm_values_yml ?? '') : '',
      };
  // The secrets are read only when there is a text to mask: a deploy with no note, not refused, reads none.
  const mask =
    refusal || body.note
      ? redactor(
          await maskedValuesOf(trx, box, {
            environment_id: service.environment_id,
            service_id: service.id,
            variables_sealed: copy?.of.variables_sealed ?? null,
          }),
        )
      : (text: string) => text;
  const { deployment, previousState } = await insertDeployment(trx, {
    id: randomUUID(),
    account_id: service.account_id,
    environment_id: service.environment_id,
    service_id: service.id,
    type: copy?.type ?? 'service_update',
    state: refusal === null ? 'queued' : 'failed',
    failure_reason: mask(refusal ?? ''),
    prev_deployment_id: service.latest_deployment_id,
    ...target,
    note: mask(body.note ?? ''),
  });
  await moveLiveService(trx, service.id, refusal === null ? 'deploy_queued' : 'deploy_failed', {
    latest_deployment_id: deployment.id,
  });
  // Queued by the commit's statement, still under the service's lock: jobs keep the accepted order.
  if (refusal === null)
    await enqueueAtCommit(trx, {
      kind: 'deploy',
      subjectId: deployment.id,
      accountId: service.account_id,
      queueKey: service.id,
    });
  await logAccepted(
    trx,
    deployment,
    previousState,
    refusal === null ? null : deployment.failure_reason,
    mask,
  );
  return deployment;
}

/** The first lines of a deployment's log: what was asked for, and what it waits behind. */
async function logAccepted(
  trx: Db,
  deployment: DeploymentRow,
  previousState: DeploymentRow['state'] | null,
  refusal: string | null,
  mask: (text: string) => string,
): Promise<void> {
  const at = new Date();
  const target =
    deployment.git_commit_ref ||
    deployment.helm_chart_version ||
    deployment.docker_image_tag ||
    'the head of the configured branch';
  const note = deployment.note ? ` (note: ${deployment.note})` : '';
  const what =
    deployment.type === 'restore'
      ? `A restore deployment (bringing back ${deployment.restored_from})`
      : deployment.restored_from
        ? `A restart (running ${deployment.restored_from} again)`
        : 'Deployment';
  const waiting =
    previousState === 'queued' || previousState === 'in_progress'
      ? `Queued behind deployment ${deployment.prev_deployment_id} (${previousState})`
      : 'Queued';
  const done = (step: 'accept' | 'queue' | 'outcome', state: 'success' | 'failed' | 'running') => ({
    step,
    state,
    startedAt: at,
    finishedAt: state === 'running' ? null : at,
  });
  await appendDeploymentLog(
    trx,
    deployment.id,
    [
      { step: 'accept', line: mask(`${what} of ${target} accepted${note}`), at },
      refusal === null
        ? { step: 'queue', line: waiting, at }
        : { step: 'outcome', line: `Deployment failed: ${refusal}`, at },
    ],
    refusal === null
      ? [done('accept', 'success'), done('queue', 'running')]
      : [done('accept', 'success'), done('outcome', 'failed')],
    refusal === null
      ? [{ mark: 'accepted', at }]
      : [
          { mark: 'accepted', at },
          { mark: 'failed', at },
        ],
  );
}

export async function deploy(
  deps: Pick<Deps, 'store' | 'config' | 'secretBox'>,
  actor: Actor,
  service: ServiceRow,
  body: DeployBody,
): Promise<DeploymentRow> {
  // The allow-list may have changed since the service was saved: a deploy checks it again.
  const errors = [
    ...checkDeployTarget(body, service.source),
    ...registryErrors(service, deps.config.allowedRegistries),
  ];
  if (errors.length > 0) throw ValidationError.fields(errors);
  assertNotDeleting(service);
  return deps.store.db.transaction().execute(async (trx) => {
    const locked = await lockLiveService(trx, service.id);
    const deployment = await acceptDeployment(trx, deps.secretBox, service.id, body, { locked });
    await recordAudit(trx, actor, 'deployment.create', {
      id: deployment.id,
      environmentId: service.environment_id,
    });
    return deployment;
  });
}

import { randomUUID } from 'node:crypto';
import type { Db } from '../../store/database.ts';
import { findPreview, insertService } from '../../store/repositories/services.ts';
import type { ServiceRow } from '../../store/schema.ts';
import { type FieldError, ValidationError } from '../errors.ts';
import { branchNameError } from '../git-ref-rules.ts';
import type { DeployBody } from '../inputs.ts';
import { kubeSecretNames } from '../subdomain.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { acceptDeployment, targetValueError } from './deployments.ts';
import { readSecrets, storeSecrets } from './secrets.ts';
import { assertNotDeleting, lockLiveService } from './service-guards.ts';

/** Why `body` is no preview deployment, whatever the service: its target fields. */
export function checkPreviewBody(body: DeployBody): FieldError[] {
  const errors: FieldError[] = [];
  for (const field of ['commit_id', 'branch', 'pr_number'] as const) {
    if (body[field] === undefined || body[field] === '')
      errors.push({ field, error: `${field} is a required field` });
  }
  const commitError = body.commit_id ? targetValueError('commit_id', body.commit_id) : null;
  if (commitError) errors.push({ field: 'commit_id', error: commitError });
  const branchError = body.branch ? branchNameError('branch', body.branch) : null;
  if (branchError) errors.push({ field: 'branch', error: branchError });
  for (const field of ['docker_image_tag', 'helm_chart_version'] as const) {
    if (body[field] !== undefined)
      errors.push({ field, error: `${field} cannot be given for a preview deployment` });
  }
  return errors;
}

/** Why a preview of `parent` cannot be deployed with `body`: the deploy endpoint's preview-mode rules. */
export function checkPreview(parent: ServiceRow, body: DeployBody): FieldError[] {
  const errors = checkPreviewBody(body);
  const parentRules: [boolean, string][] = [
    [parent.source === 'github', 'previews need a service whose source is github'],
    [parent.type === 'web', 'previews need a service whose type is web'],
    [parent.enable_previews, 'previews are not enabled on this service (set enable_previews)'],
    [!parent.is_preview, 'a preview service cannot have previews of its own'],
  ];
  // One error per field, as everywhere: a client that keys errors by field keeps every reason.
  const broken = parentRules.filter(([ok]) => !ok).map(([, error]) => error);
  if (broken.length > 0) errors.push({ field: 'preview', error: broken.join('; ') });
  return errors;
}

async function createPreviewService(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  parent: ServiceRow,
  body: DeployBody,
): Promise<ServiceRow> {
  const id = randomUUID();
  const subdomain = `pr-${body.pr_number}-${parent.subdomain}`;
  const preview = await insertService(trx, {
    ...parent,
    id,
    name: `${parent.name} (PR#${body.pr_number})`,
    state: 'deploy_pending',
    git_repo_branch: body.branch as string,
    auto_deploy: true,
    is_protected: false,
    enable_previews: false,
    enable_code_review: false,
    is_deleted: false,
    is_preview: true,
    parent_service_id: parent.id,
    pr_number: body.pr_number as number,
    pr_comment_id: null,
    subdomain,
    ...kubeSecretNames(subdomain),
    namespace_name: null,
    kube_svc_alias: null,
    custom_domain_id: null,
    latest_deployment_id: null,
    // Its own commit's ops.json, once its first deployment reads it: never the parent's.
    repo_ops: null,
    created_at: new Date(),
    updated_at: new Date(),
  });
  const inherited = (await readSecrets(trx, deps.secretBox, parent.id)).filter((s) => s.use_preview);
  if (inherited.length > 0) {
    await storeSecrets(
      trx,
      deps.secretBox,
      { scope: 'service', id, environmentId: parent.environment_id, accountId: parent.account_id },
      inherited,
    );
  }
  return preview;
}

/** Creates (first time) or reuses the preview service of a pull request and deploys the commit on it. */
export async function deployPreview(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  actor: Actor,
  parent: ServiceRow,
  body: DeployBody,
) {
  const errors = checkPreview(parent, body);
  if (errors.length > 0) throw ValidationError.fields(errors);
  assertNotDeleting(parent);
  return deps.store.db.transaction().execute((trx) => deployPreviewIn(trx, deps, actor, parent, body));
}

/**
 * The preview deployment inside the caller's transaction (a pull-request webhook writes it with the
 * delivery that caused it); the caller checked the body (`previewErrors`).
 */
export async function deployPreviewIn(
  trx: Db,
  deps: Pick<Deps, 'secretBox'>,
  actor: Actor,
  parent: ServiceRow,
  body: DeployBody,
) {
  // The parent's lock serializes two first deploys of the same pull request, and sees a delete.
  await lockLiveService(trx, parent.id);
  const existing = await findPreview(trx, parent.id, body.pr_number as number);
  const preview = existing ?? (await createPreviewService(trx, deps, parent, body));
  if (existing) assertNotDeleting(existing);
  await acceptDeployment(trx, deps.secretBox, preview.id, { commit_id: body.commit_id, note: body.note });
  await recordAudit(trx, actor, existing ? 'deployment.preview' : 'deployment.preview.create', {
    type: 'service',
    id: preview.id,
    environmentId: parent.environment_id,
  });
  return { preview, isNew: !existing };
}

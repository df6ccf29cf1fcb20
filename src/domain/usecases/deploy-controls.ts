import type { Db } from '../../store/database.ts';
import { appendDeploymentLog } from '../../store/repositories/deployment-logs.ts';
import {
  findDeployment,
  newestUncancelledDeployment,
  requestCancel,
  successfulDeployments,
  transitionDeployment,
} from '../../store/repositories/deployments.ts';
import { transitionService } from '../../store/repositories/services.ts';
import type { DeploymentRow, ServiceRow } from '../../store/schema.ts';
import type { DeploymentState } from '../deployment-states.ts';
import { ConflictError, ValidationError } from '../errors.ts';
import { LIVE_STATES, type ServiceState } from '../service-states.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { acceptDeployment } from './deployments.ts';
import { assertNotDeleting, lockLiveService, lockService } from './service-guards.ts';

const SERVICE_STATE_OF: Record<DeploymentState, ServiceState> = {
  queued: 'deploy_queued',
  in_progress: 'deploying',
  success: 'running',
  failed: 'deploy_failed',
};

/**
 * Where a service stands when `cancelledId`, its latest deployment, is cancelled: on its newest other
 * deployment not cancelled, in that one's state (`deploy_pending` when there is none). A cancel is no
 * failure, so the service does not show `deploy_failed` (nor open a deploy_failed alert) while the
 * version before it serves, and a deployment still running before it moves the service on when it ends.
 */
export async function placeAfterCancel(
  trx: Db,
  serviceId: string,
  cancelledId: string,
): Promise<{ serviceState: ServiceState; latestDeploymentId: string | null }> {
  const previous = await newestUncancelledDeployment(trx, serviceId, cancelledId);
  return {
    serviceState: previous ? SERVICE_STATE_OF[previous.state] : 'deploy_pending',
    latestDeploymentId: previous?.id ?? null,
  };
}

/** A queued deployment cancelled while it was the service's latest hands that place back (placeAfterCancel). */
async function standOnUncancelled(trx: Db, cancelled: DeploymentRow): Promise<void> {
  const service = await lockService(trx, cancelled.service_id);
  if (service.latest_deployment_id !== cancelled.id) return;
  const place = await placeAfterCancel(trx, service.id, cancelled.id);
  await transitionService(trx, service.id, LIVE_STATES, place.serviceState, {
    latest_deployment_id: place.latestDeploymentId,
  });
}

/**
 * Cancel: a queued deployment ends `failed` (reason `cancelled`) at once and never runs; one in
 * progress is flagged, and its worker stops it before traffic moves (then it ends `failed`, reason
 * `cancelled`; past that point it finishes). A terminal one is a 409.
 */
export async function cancelDeployment(
  deps: Pick<Deps, 'store'>,
  actor: Actor,
  deployment: DeploymentRow,
): Promise<DeploymentRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    const at = new Date();
    if (
      await transitionDeployment(trx, deployment.id, ['queued'], 'failed', { failure_reason: 'cancelled' })
    ) {
      await standOnUncancelled(trx, deployment);
      await appendDeploymentLog(
        trx,
        deployment.id,
        [{ step: 'outcome', line: 'Deployment cancelled before it started', at }],
        [
          { step: 'queue', state: 'failed', startedAt: deployment.created_at, finishedAt: at },
          { step: 'outcome', state: 'failed', startedAt: at, finishedAt: at },
        ],
        [{ mark: 'failed', at }],
      );
    } else if (await requestCancel(trx, deployment.id)) {
      await appendDeploymentLog(trx, deployment.id, [
        { step: 'outcome', line: 'Cancel requested: the rollout stops before traffic moves', at },
      ]);
    } else {
      throw new ConflictError(
        `Deployment ${deployment.id} has ended (${deployment.state}): there is nothing to cancel`,
      );
    }
    await recordAudit(trx, actor, 'deployment.cancel', {
      id: deployment.id,
      environmentId: deployment.environment_id,
    });
    return (await findDeployment(trx, actor.accountId, deployment.id)) as DeploymentRow;
  });
}

/** An earlier deployment can be brought back only if it recorded what it ran with. */
function assertRestorable(d: DeploymentRow): void {
  if (d.variables_sealed === null) {
    throw new ConflictError(
      `Deployment ${d.id} ran before Berth recorded what deployments run with: deploy its target again instead`,
    );
  }
}

/**
 * Rollback: a new `restore` deployment with an earlier successful deployment's target (its resolved
 * commit, image tag or chart), ops config and variables as they were then. By default the last
 * successful one before the one serving now.
 */
export async function rollback(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  actor: Actor,
  service: ServiceRow,
  body: { deployment_id?: string; note?: string },
): Promise<DeploymentRow> {
  assertNotDeleting(service);
  return deps.store.db.transaction().execute(async (trx) => {
    await lockLiveService(trx, service.id);
    let target: DeploymentRow | undefined;
    if (body.deployment_id) {
      target = await findDeployment(trx, actor.accountId, body.deployment_id);
      if (!target || target.service_id !== service.id) {
        throw ValidationError.fields([
          { field: 'deployment_id', error: 'deployment_id must name a deployment of this service' },
        ]);
      }
      if (target.state !== 'success') {
        throw ValidationError.fields([
          {
            field: 'deployment_id',
            error: `deployment_id must name a successful deployment (it is ${target.state})`,
          },
        ]);
      }
    } else {
      target = (await successfulDeployments(trx, service.id, 2))[1];
      if (!target) throw new ConflictError('There is no earlier successful deployment to roll back to');
    }
    assertRestorable(target);
    const deployment = await acceptDeployment(
      trx,
      deps.secretBox,
      service.id,
      { note: body.note ?? `Rollback to ${target.id}` },
      { copy: { type: 'restore', of: target } },
    );
    await recordAudit(trx, actor, 'deployment.rollback', {
      id: deployment.id,
      environmentId: service.environment_id,
    });
    return deployment;
  });
}

/**
 * Restart: the serving deployment again (same target, ops and variables), as new replicas. Its type is
 * `service_update` (the contract reserves `restore` for rollbacks); `restored_from` names the one it runs.
 */
export async function restart(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  actor: Actor,
  service: ServiceRow,
  body: { note?: string },
): Promise<DeploymentRow> {
  assertNotDeleting(service);
  return deps.store.db.transaction().execute(async (trx) => {
    await lockLiveService(trx, service.id);
    const [serving] = await successfulDeployments(trx, service.id, 1);
    if (!serving) throw new ConflictError('The service has no successful deployment to restart');
    assertRestorable(serving);
    const deployment = await acceptDeployment(
      trx,
      deps.secretBox,
      service.id,
      { note: body.note ?? `Restart of ${serving.id}` },
      { copy: { type: 'service_update', of: serving } },
    );
    await recordAudit(trx, actor, 'deployment.restart', {
      id: deployment.id,
      environmentId: service.environment_id,
    });
    return deployment;
  });
}

/**
 * Projections that both the API and the workers show: a deployment as the API reads it, and an event
 * (GET /v1/events and webhook bodies: one shape, whoever sends it).
 * @module
 */
import type { DeploymentRow, EventRow } from '../../store/schema.ts';
import { ZERO_UUID } from '../schema-types.ts';

const iso = (d: Date) => d.toISOString();

export function deploymentView(d: DeploymentRow) {
  return {
    id: d.id,
    type: d.type,
    state: d.state,
    service_id: d.service_id,
    private_instance_id: d.environment_id,
    // Environments here are not tied to separate cloud connection records.
    cloud_connection_id: ZERO_UUID,
    account_id: d.account_id,
    prev_deployment_id: d.prev_deployment_id ?? ZERO_UUID,
    prov_deployment_id: d.prov_deployment_id,
    op_ids: [],
    ops: {},
    git_commit_ref: d.git_commit_ref,
    git_commit_author: d.git_commit_author,
    git_commit_message: d.git_commit_message,
    docker_image_tag: d.docker_image_tag,
    helm_chart_version: d.helm_chart_version,
    helm_values_yml: d.helm_values_yml,
    docker_image_digest: d.docker_image_digest,
    note: d.note,
    failure_reason: d.failure_reason,
    created_by_id: ZERO_UUID,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
  };
}

/** The columns an event kept (migration 0018), in the API's names and shapes (dates as ISO strings). */
export function eventView(e: EventRow) {
  // biome-ignore lint/suspicious/noExplicitAny: a jsonb snapshot whose columns the kind fixes
  const state = e.data as Record<string, any>;
  const kind = e.type.slice(0, e.type.indexOf('.'));
  const { environment_id, ...rest } = state;
  const data =
    kind === 'deployment'
      ? deploymentView({
          ...(state as DeploymentRow),
          created_at: new Date(state.created_at),
          updated_at: new Date(state.updated_at),
        })
      : {
          ...rest,
          ...(environment_id !== undefined && { private_instance_id: environment_id }),
          ...Object.fromEntries(
            [
              'created_at',
              'updated_at',
              'provisioned_at',
              'completed_at',
              'restore_requested_at',
              'restore_completed_at',
            ]
              .filter((k) => typeof state[k] === 'string')
              .map((k) => [k, iso(new Date(state[k]))]),
          ),
        };
  return { id: String(e.seq), type: e.type, account_id: e.account_id, timestamp: iso(e.at), data };
}

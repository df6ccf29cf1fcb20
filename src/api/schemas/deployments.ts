import { Type } from 'typebox';
import { DEPLOYMENT_STATES, DEPLOYMENT_TYPES } from '../../domain/deployment-states.ts';
import { DateTime, StringEnum, Uuid } from './common.ts';

export const Deployment = Type.Object({
  id: Uuid,
  type: StringEnum(DEPLOYMENT_TYPES, {
    maxLength: 30,
    description: 'service_update for API deploys and restarts; restore for a rollback',
  }),
  state: StringEnum(DEPLOYMENT_STATES, {
    maxLength: 20,
    description: 'queued, in_progress, success or failed (the last two are terminal)',
  }),
  service_id: Uuid,
  private_instance_id: Uuid,
  cloud_connection_id: Uuid,
  account_id: Uuid,
  prev_deployment_id: Uuid,
  prov_deployment_id: Type.String({ maxLength: 200 }),
  op_ids: Type.Array(Type.String({ maxLength: 100 }), { maxItems: 0 }),
  ops: Type.Object({}, { additionalProperties: false }),
  git_commit_ref: Type.String({
    maxLength: 200,
    description: 'the commit asked for; once the provider resolved it, the full id of the commit deployed',
  }),
  git_commit_author: Type.String({ maxLength: 200, description: '`Name <email>` of the commit deployed' }),
  git_commit_message: Type.String({ maxLength: 2000, description: 'the message of the commit deployed' }),
  docker_image_tag: Type.String({ maxLength: 128 }),
  helm_chart_version: Type.String({ maxLength: 100 }),
  helm_values_yml: Type.String({ maxLength: 262_144 }),
  docker_image_digest: Type.String({
    maxLength: 100,
    description:
      'the image the deployment ran, `sha256:...` (its registry digest when pulled, else the local image id); empty until the provider resolved it',
  }),
  note: Type.String({ maxLength: 300 }),
  failure_reason: Type.String({
    maxLength: 2000,
    description:
      "why a failed deployment failed; while a transient provider error is retried, that attempt's error; empty otherwise",
  }),
  created_by_id: Uuid,
  created_at: DateTime,
  updated_at: DateTime,
});

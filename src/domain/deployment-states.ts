/** A deployment's `state` (success and failed are terminal) and `type` (restore is reserved for rollbacks). */
export const DEPLOYMENT_STATES = ['queued', 'in_progress', 'success', 'failed'] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATES)[number];
/** A deployment in one of these never changes again. */
export const TERMINAL_DEPLOYMENT_STATES: readonly DeploymentState[] = ['success', 'failed'];

/**
 * restore: a rollback to an earlier deployment; every other deployment the API makes, a restart
 * included, is a service_update (contract). The hosted API's Deployment `type` allows update, restore
 * and service_update, and nothing else.
 */
export const DEPLOYMENT_TYPES = ['service_update', 'restore'] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];

/**
 * The steps of a deployment, in the order they happen: its operations (GET .../operations) and the
 * step each line of its log belongs to. `build` is a git source's, `pull` an image's.
 */
export const DEPLOY_STEPS = [
  'accept',
  'queue',
  'source',
  'build',
  'pull',
  'dependencies',
  'rollout',
  'traffic',
  'drain',
  'outcome',
] as const;
export type DeployStep = (typeof DEPLOY_STEPS)[number];

export const OPERATION_STATES = ['running', 'success', 'failed'] as const;
export type OperationState = (typeof OPERATION_STATES)[number];

/**
 * A deployment's timeline: the moments of its way to live, in the order they happen on a rollout that
 * succeeds (GET .../operations lists them with millisecond timestamps). Each is kept the first time it
 * happens. The old version stops after `success` (a rollout never waits for it); `failed` ends one that
 * did not make it.
 */
export const TIMELINE_MARKS = [
  'accepted',
  'claimed',
  'image_resolved',
  'container_created',
  'container_started',
  'first_healthy',
  'routed',
  'success',
  'failed',
  'old_stopped',
] as const;
export type TimelineMark = (typeof TIMELINE_MARKS)[number];

/** A deployment's `state` (success and failed are terminal) and `type` (restore is reserved for rollbacks). */
export const DEPLOYMENT_STATES = ['queued', 'in_progress', 'success', 'failed'] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATES)[number];
/** A deployment in one of these never changes again. */
export const TERMINAL_DEPLOYMENT_STATES: readonly DeploymentState[] = ['success', 'failed'];

export const DEPLOYMENT_TYPES = ['service_update', 'restore'] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];

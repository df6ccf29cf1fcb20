/** A deployment's `state` (success and failed are terminal) and `type` (restore is reserved for rollbacks). */
export const DEPLOYMENT_STATES = ['queued', 'in_progress', 'success', 'failed'] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATES)[number];

export const DEPLOYMENT_TYPES = ['service_update', 'restore'] as const;
export type DeploymentType = (typeof DEPLOYMENT_TYPES)[number];

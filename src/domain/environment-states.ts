/** An environment's `state` and the clouds it can live in. */
export const ENVIRONMENT_STATES = ['provisioning', 'available', 'failed', 'deleting', 'deleted'] as const;
export type EnvironmentState = (typeof ENVIRONMENT_STATES)[number];

export const CLOUDS = ['aws', 'gcp'] as const;
export type Cloud = (typeof CLOUDS)[number];

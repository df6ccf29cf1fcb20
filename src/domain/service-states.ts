/** The service `state` values (spec) and the moves the contract gives them. */
export const SERVICE_STATES = [
  'deploy_pending',
  'deploy_queued',
  'deploying',
  'deploy_failed',
  'running',
  'delete_pending',
  'delete_queued',
  'deleting',
  'deleted',
  'delete_failed',
] as const;
export type ServiceState = (typeof SERVICE_STATES)[number];

/** Once a delete is accepted the service stays in these; deployments no longer move its state. */
export const DELETE_STATES: readonly ServiceState[] = [
  'delete_pending',
  'delete_queued',
  'deleting',
  'deleted',
  'delete_failed',
];

/** Before any delete: the states a deployment moves a service between. */
export const LIVE_STATES: readonly ServiceState[] = SERVICE_STATES.filter((s) => !DELETE_STATES.includes(s));

export function isDeleting(state: string): boolean {
  return (DELETE_STATES as readonly string[]).includes(state);
}

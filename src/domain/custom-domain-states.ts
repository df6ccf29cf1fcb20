/** A custom domain's `state`: verified by DNS, then deployed to the ingress; deleted in the same manner. */
export const CUSTOM_DOMAIN_STATES = [
  'unverified',
  'verified',
  'deploy_queued',
  'deploying',
  'deployed',
  'deploy_failed',
  'delete_queued',
  'deleting',
  'deleted',
  'delete_failed',
] as const;
export type CustomDomainState = (typeof CUSTOM_DOMAIN_STATES)[number];

import type { OpsConfig } from '../domain/ops-json.ts';
import type { ServiceRow } from '../store/schema.ts';

/**
 * The provider interface: the spec's "provisioner". Every driver (sim, docker, kubernetes) implements it;
 * providers/registry.ts chooses one. Calls are idempotent: a job that runs again after a crash calls the
 * same method with the same ids, and the driver looks at what it already did.
 */
export interface EnvironmentRef {
  id: string;
  account_id: string;
  cloud: 'aws' | 'gcp';
  region: string;
}

export interface EnvironmentIdentity {
  ingress_host: string;
  public_nat_ips: string[];
  svc_role_arn: string;
  /**
   * Scheme, host and port at which the ingress answers the public (`https://ingress.example.com`,
   * `http://localhost:8088`): origins are built on it. Not part of the environment's API shape.
   */
  ingress_url: string;
}

/** A provider failure. `retryable` ones are retried with backoff; others fail the operation at once. */
export class ProviderError extends Error {
  readonly retryable: boolean;
  constructor(message: string, options: { retryable: boolean }) {
    super(message);
    this.retryable = options.retryable;
  }
}

export interface DeployTarget {
  /** Empty: the head of the configured branch. */
  commit_id: string;
  /** `latest` when the caller named none. */
  docker_image_tag: string;
  /** Empty: the latest chart version. */
  helm_chart_version: string;
}

export interface DeployRequest {
  deploymentId: string;
  service: ServiceRow;
  environment: EnvironmentRef;
  target: DeployTarget;
  ops: OpsConfig;
  /** Variables the service runs with: secrets (environment overlaid by service). */
  variables: Record<string, string>;
  /** Aborted when the worker loses the job: stop before moving traffic, report nothing. */
  signal?: AbortSignal;
}

/** What a deployment actually ran, once the provider resolved its target (the branch head, `latest`). */
export interface DeployedSource {
  git_commit_ref?: string;
  git_commit_author?: string;
  git_commit_message?: string;
  docker_image_digest?: string;
}

export type DeployResult =
  | { ok: true; provDeploymentId: string; namespaceName: string; svcAlias: string; source?: DeployedSource }
  | { ok: false; provDeploymentId: string; reason: string; source?: DeployedSource };

export interface RuntimeStatus {
  run_status: string;
  ready_count: number;
}

export interface Provider {
  readonly name: string;
  /** A reason to refuse a deployment of this service at once, or null. Synchronous and cheap. */
  refuseDeploy(service: ServiceRow): string | null;
  /** Rolls out one deployment; resolves when it has succeeded or failed. */
  deploy(request: DeployRequest): Promise<DeployResult>;
  /** Live runtime status of a service. */
  status(service: ServiceRow): Promise<RuntimeStatus>;
  /** Tears down everything the service runs. */
  deleteService(service: ServiceRow): Promise<void>;
  /** The zone that certificate-validation CNAMEs of custom domains point into. */
  domainValidationZone(env: EnvironmentRef): string;
  /** Routes a verified custom domain to the service (certificate, ingress rule). */
  attachDomain(
    service: ServiceRow,
    domain: { id: string; domain: string },
  ): Promise<{ provCustomDomainId: string }>;
  /** Stops routing a retired custom domain. */
  detachDomain(service: ServiceRow, domain: { id: string; domain: string }): Promise<void>;
  /** Starts what runs beside the API in `berth serve` (the docker provider's ingress and cron scheduler). */
  startServing(): Promise<void>;
  /** Writes a scope's secrets where the workloads read them. */
  writeSecrets(
    scope: 'service' | 'environment',
    scopeId: string,
    values: Record<string, string>,
  ): Promise<void>;
  /** Creates the environment's network and identity; resolves once it is usable. */
  provisionEnvironment(env: EnvironmentRef): Promise<void>;
  /** The live network identity of an environment. */
  environmentIdentity(env: EnvironmentRef): Promise<EnvironmentIdentity>;
  close(): Promise<void>;
}

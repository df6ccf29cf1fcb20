/**
 * The provider seam: the spec's "provisioner", in controller-runtime's manner. A job builds the desired
 * state of a service as a plain value and hands it to `apply`; `observe` reports what runs (the jobs
 * layer writes it back to the store: the API never calls a provider per request); `remove` tears a
 * service down; `ensureEnvironment` and `identity` cover environments. Serving (an ingress, cron
 * schedulers), a secret store and an admission check are optional capabilities.
 *
 * One error channel: a driver throws jobs/errors.ts's TerminalError for what a retry cannot fix and
 * anything else for what it may (retried with backoff). Every call is idempotent: a job that runs again
 * after a crash calls it with the same value, and the driver looks at what it already did.
 *
 * Each driver parses its own settings, owns its tables (and their migrations) and reads no other table;
 * registry.ts is the one place that maps a name to a driver.
 * @module
 */
import type { DeployStep, TimelineMark } from '../domain/deployment-states.ts';
import type { GitAccess } from '../domain/git-auth.ts';
import type { OpsConfig, OpsResource } from '../domain/ops-json.ts';
import { TerminalError } from '../jobs/errors.ts';
import type { ServiceRow } from '../store/schema.ts';

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

export interface DeployTarget {
  /** Empty: the head of the configured branch. */
  commit_id: string;
  /** `latest` when the caller named none. */
  docker_image_tag: string;
  /** Empty: the latest chart version. */
  helm_chart_version: string;
  /**
   * What the git host said of `commit_id` when a push asked for it: what the deployment records, so a
   * provider that cannot read the commit itself (the sim) reports it rather than inventing one.
   */
  commit?: { author: string; message: string };
}

/** The fields of a service a runtime needs to run it. */
export type RuntimeSpec = Pick<
  ServiceRow,
  | 'id'
  | 'account_id'
  | 'environment_id'
  | 'name'
  | 'subdomain'
  | 'type'
  | 'source'
  | 'port'
  | 'cron_schedule'
  | 'replica_count'
  | 'cpu_count_min'
  | 'cpu_count_max'
  | 'memory_mb_min'
  | 'memory_mb_max'
  | 'docker_image'
  | 'docker_registry'
  | 'git_repo_full_name'
  | 'git_repo_branch'
  | 'build_context'
  | 'dockerfile_path'
  | 'ops_json_path'
  | 'run_command'
  | 'helm_chart_repo'
  | 'helm_chart_name'
  | 'prov_node_group_id'
>;

/** What identifies a service to a runtime: enough to find what runs for it. */
export type ServiceRef = Pick<ServiceRow, 'id' | 'account_id' | 'environment_id' | 'type'>;

/** Everything a service should be, as one value. */
export interface DesiredService {
  service: RuntimeSpec;
  environment: EnvironmentRef;
  /** The deployment that asks for this state. */
  deploymentId: string;
  /**
   * Fencing token: monotonic per service (the deployment's sequence). A driver never replaces what a
   * newer generation put in place; applying an older one throws SupersededError.
   */
  generation: number;
  target: DeployTarget;
  ops: OpsConfig;
  /** Variables the service runs with: its dependencies' resolved exports, overlaid by secrets (environment, then service). */
  variables: Record<string, string>;
  /** The service's active custom domains: the hosts it is served under besides its subdomain. */
  domains: string[];
  /** A git service's connection: its host and credential. Absent: anonymous, from the driver's default host. */
  git?: GitAccess;
}

/**
 * The generation a removed service's tombstone carries: newer than any deployment's, so no apply brings
 * the service back. The largest integer a JavaScript number holds exactly (drivers read bigint columns
 * as numbers or strings, depending on the database driver).
 */
export const REMOVED_GENERATION = Number.MAX_SAFE_INTEGER;

/** What a deployment actually ran, once the provider resolved its target (the branch head, `latest`). */
export interface DeployedSource {
  git_commit_ref?: string;
  git_commit_author?: string;
  git_commit_message?: string;
  docker_image_digest?: string;
}

/** What an apply put in place. */
export interface Applied {
  provDeploymentId: string;
  namespaceName: string;
  svcAlias: string;
  source?: DeployedSource;
}

/**
 * The reason a deploy's `signal` carries when a user cancelled it (rather than the worker losing its
 * job): the driver removes what the rollout started, since no other worker will take it over.
 */
export class DeploymentCancelled extends Error {
  constructor() {
    super('cancelled');
  }
}

/** A rollout that failed for good after its source was resolved: the deployment records what it ran. */
export class DeployFailed extends TerminalError {
  readonly source: DeployedSource;
  constructor(message: string, source: DeployedSource) {
    super(message);
    this.source = source;
  }
}

/** A driver's failure: terminal, or retried with backoff (a registry or network that may come back). */
export function failure(message: string, options: { retryable: boolean }): Error {
  return options.retryable ? new Error(message) : new TerminalError(message);
}

/** What runs for a service, as the runtime reports it. */
export interface Observed {
  run_status: string;
  ready_count: number;
  /** The generation in place (Kubernetes' observedGeneration); null when nothing was ever applied. */
  generation: number | null;
}

/**
 * Where a driver tells what a deployment is doing, step by step (the deployment's log and operations):
 * what it resolved, build and pull output, each replica created, healthy or failed with its output,
 * traffic moved, the old version drained. Cheap and synchronous: the jobs layer buffers and writes it.
 */
export interface DeployLog {
  /** One or more lines (split at line breaks) under `step`, which is running from its first line. */
  line(step: DeployStep, text: string): void;
  /** `step` ended; `text`, when given, is its last line. */
  end(step: DeployStep, outcome: 'success' | 'failed', text?: string): void;
  /**
   * A moment of the deployment's timeline happened now (the first time counts). Usable after apply
   * resolved: the old version stops later.
   */
  mark(mark: TimelineMark): void;
}

/** For calls that keep no log (re-applying the generation in place with new domains). */
export const SILENT_LOG: DeployLog = { line: () => undefined, end: () => undefined, mark: () => undefined };

/** One line a service's workload printed. */
export interface LogLine {
  /** ISO 8601, UTC, with milliseconds. */
  time: string;
  /** The replica (container, pod) or run that printed it. */
  replica: string;
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface LogQuery {
  /** Only lines printed at or after this time. */
  since?: Date;
  /** At most this many of the newest lines printed before the call (then, with follow, every new one). */
  tail: number;
  /** Keep streaming lines printed after the call until `signal` aborts. */
  follow: boolean;
  signal: AbortSignal;
}

/** The output of a service's replicas, job runs and cron runs. */
export interface ServiceLogs {
  read(service: ServiceRef & Pick<RuntimeSpec, 'subdomain'>, query: LogQuery): AsyncIterable<LogLine>;
}

/** A certificate the ingress serves for a name: the PEM chain and its private key. */
export interface ServedCertificate {
  cert: string;
  key: string;
}

/**
 * What Berth gives an ingress that terminates TLS (jobs/certificates.ts obtains the certificates by ACME
 * and keeps them in Berth's tables, which a driver never reads).
 */
export interface CertificateSource {
  /** The key authorization to answer an HTTP-01 challenge's token with, or null. */
  httpChallenge(token: string): Promise<string | null>;
  /** The certificate to present to a TLS-ALPN-01 (`acme-tls/1`) handshake for `name`, or null. */
  alpnChallenge(name: string): Promise<ServedCertificate | null>;
  /** The certificate `name` is served with over HTTPS, or null: the name is served over HTTP only. */
  certificate(name: string): Promise<ServedCertificate | null>;
}

/** Runs beside the API in `berth serve`: the docker driver's ingress and cron scheduler. */
export interface Serving {
  /** `certificates`: given when ACME is on; an ingress that terminates TLS then serves HTTPS too. */
  start(context?: { certificates?: CertificateSource }): Promise<void>;
  stop(): Promise<void>;
}

/** For runtimes whose workloads read secrets from a store of their own (Kubernetes Secrets). */
export interface SecretStore {
  write(scope: 'service' | 'environment', scopeId: string, values: Record<string, string>): Promise<void>;
}

/**
 * For runtimes that can tell before any work that they will never run a service as specified: a
 * deployment asked for at creation (deploy_now) then fails at once, and the create call says so.
 */
export interface Admission {
  /** The reason, or null. Synchronous and cheap: it runs inside the create request. */
  refusal(service: RuntimeSpec): string | null;
}

/** What names a dependency: changing any of these replaces the resource. */
export type ResourceKey = Pick<OpsResource, 'kind' | 'type' | 'id' | 'prefix'>;

/** A dependency to make: the service that declares it, where, as declared, and the password for a new one. */
export interface ResourceRequest {
  service: ServiceRef;
  environment: EnvironmentRef;
  resource: OpsResource;
  password: string;
}

/** A dependency made: its `$...` attributes by name (without the `$`), and a generated password apart. */
export interface ProvisionedResource {
  attributes: Record<string, string>;
  password?: string;
}

/**
 * ops.json dependencies as real resources. The jobs layer decides what to make, update and delete (and
 * records it); a driver only makes each resource as declared. A kind or type the driver cannot make is a
 * TerminalError whose message names it.
 */
export interface Resources {
  /**
   * Makes the resource exist as declared, at most once: the same value again changes nothing and returns
   * the same attributes (and password); changed properties update it in place. `password` is the one to
   * give a new resource that needs one: the jobs layer generates it and seals it in its store before
   * the first call, so a call that runs again after a crash gets the same one (a driver that cannot read
   * a password back from what it made relies on that). `signal` as for apply.
   */
  ensure(request: ResourceRequest, signal: AbortSignal): Promise<ProvisionedResource>;
  /** Deletes the resource and its data; one already gone is fine. */
  delete(service: ServiceRef, resource: ResourceKey): Promise<void>;
}

/** One backup of a dependency: whose, which, and its id (what the driver names its file after). */
export interface BackupRequest {
  service: ServiceRef;
  environment: EnvironmentRef;
  resource: OpsResource;
  backupId: string;
  /**
   * The dependency's password as Berth keeps it (sealed in its store, opened for the call); none for
   * an engine without one. A driver that cannot read the password back from what it made (a swarm
   * secret) gives it to the dump tool.
   */
  password?: string;
}

/**
 * Logical backups of ops.json dependencies (rds, elasticache): a dump written by the engine's own tool
 * into the driver's backup target, and read back into the dependency. The jobs layer decides when and
 * records each one; a driver only writes, reads and discards files.
 */
export interface DependencyBackups {
  /**
   * Writes a dump of the dependency; resolves with where (the driver's name for it, kept by the jobs
   * layer) and its size. Never leaves a partial file under the final name: a run killed midway leaves
   * at most a temporary one, which the next run replaces. A failure the dump tool or the target reports
   * (a full or unwritable target) is a TerminalError naming it.
   */
  backup(request: BackupRequest, signal: AbortSignal): Promise<{ location: string; sizeBytes: number }>;
  /**
   * `into: 'same'`: replaces the dependency's data with the dump at `location`; `stop` names the
   * services using it, whose workloads stop for the duration and start again after (also when the
   * restore fails). `into: 'new'`: makes a copy of the dependency for inspection (one per dependency: a
   * new one replaces the last; deleting the dependency deletes it), loads the dump into it, and returns
   * its attributes (never a password: it has the dependency's own).
   */
  restore(
    request: BackupRequest & { location: string; stop: ServiceRef[]; into: 'same' | 'new' },
    signal: AbortSignal,
  ): Promise<{ attributes?: Record<string, string> }>;
  /** Deletes the dump at `location` (retention); one already gone is fine. */
  discard(environment: EnvironmentRef, location: string): Promise<void>;
  /**
   * Starts again the workloads of `services` that a restore into the dependency left stopped because it
   * never ended (its job gave up after its workers kept dying). Those running are left as they are, and
   * a service that is gone is no error.
   */
  release(environment: EnvironmentRef, services: ServiceRef[]): Promise<void>;
}

/**
 * A git service's repository as the provider builds it: what a deployment reads before anything is made
 * (its ops.json declares the resources to make first). The same commit is then built.
 */
export interface Sources {
  /**
   * The commit `target` names (the branch head when it names none), and the text of the file at `path`
   * there: null when there is no such file. A path that leads out of the repository is a TerminalError.
   */
  readFile(
    request: {
      service: RuntimeSpec;
      target: DeployTarget;
      deploymentId: string;
      git?: GitAccess;
      path: string;
    },
    signal: AbortSignal,
  ): Promise<{ commit: string; text: string | null }>;
}

/** A service as a metrics sample needs it: what runs, and the limits it runs under. */
export type MetricsSubject = ServiceRef & Pick<RuntimeSpec, 'subdomain' | 'replica_count' | 'memory_mb_max'>;

/**
 * What a service used over one collection interval (about a minute): gauges as they stand at the end of
 * it, counters as their increase since the previous sample of the same process (0 on its first).
 */
export interface ServiceSample {
  /** CPU cores in use, averaged over the interval (1.0: one core busy). Null when the runtime cannot say. */
  cpu_cores: number | null;
  /** Memory in use, in bytes; null when the runtime cannot say. */
  memory_bytes: number | null;
  /** The memory limit it runs under (memory_mb_max), in bytes; null when it has none. */
  memory_limit_bytes: number | null;
  /** Replica restarts (crashed and came back) during the interval; null when the runtime cannot say. */
  restarts: number | null;
  /** Bytes received and sent over the network during the interval; null when the runtime cannot say. */
  network_rx_bytes: number | null;
  network_tx_bytes: number | null;
  /** Requests the ingress answered for it during the interval, in total and by status class. */
  requests: number;
  status_2xx: number;
  status_3xx: number;
  status_4xx: number;
  status_5xx: number;
  /** Latency percentiles of those requests, in milliseconds; null when there were none. */
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
  latency_p99_ms: number | null;
}

/** A service's runtime metrics, sampled by the jobs layer once a minute and kept in Berth's database. */
export interface ServiceMetrics {
  /** What the service used since the previous sample; null when nothing of it runs. */
  sample(service: MetricsSubject): Promise<ServiceSample | null>;
}

export interface Provider {
  /**
   * Makes the service run as desired; resolves once it does. Applying the generation already in place
   * changes only what may change without a rollout (domains) and rolls nothing out again. `signal`
   * aborts when the worker loses the job: the driver stops before its next side effect.
   */
  apply(desired: DesiredService, signal: AbortSignal, log?: DeployLog): Promise<Applied>;
  /** What runs for the service now. */
  observe(service: ServiceRef): Promise<Observed>;
  /** Tears down everything the service runs. */
  remove(service: ServiceRef): Promise<void>;
  /** Creates the environment's network and identity; resolves once it is usable. */
  ensureEnvironment(env: EnvironmentRef): Promise<void>;
  /** The network identity of an environment. */
  identity(env: EnvironmentRef): Promise<EnvironmentIdentity>;
  /** The zone that certificate-validation CNAMEs of custom domains point into. */
  domainValidationZone(env: EnvironmentRef): string;
  /** What the service's workloads print. */
  logs: ServiceLogs;
  /** What the service uses (CPU, memory, network, requests). */
  metrics: ServiceMetrics;
  serving?: Serving;
  secrets?: SecretStore;
  /** ops.json dependencies; without it, a deployment that declares any fails naming them. */
  resources?: Resources;
  /** Dependency backups; without it, backing up a dependency is refused naming the provider. */
  backups?: DependencyBackups;
  /** Reads git services' files; without it, a git service with an ops_json_path fails its deployments. */
  sources?: Sources;
  admission?: Admission;
  /**
   * How custom domains get certificates: `acme`, the ingress terminates TLS with certificates Berth
   * orders (when ACME is configured); `simulated`, the provider has no ingress and Berth records
   * certificates as a CA would issue them (the sim). Absent: none.
   */
  certificates?: 'acme' | 'simulated';
  /**
   * The domain services' own host names are under (`{subdomain}.{ingressDomain}`), for the wildcard
   * certificate ordered by DNS-01 (jobs/ingress-certificate.ts). Absent: no ingress of Berth's own.
   */
  ingressDomain?: string;
  close(): Promise<void>;
}

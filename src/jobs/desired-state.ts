import { type OpsConfig, opsConfigOf } from '../domain/ops-json.ts';
import { isGitSource } from '../domain/service-fields.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { effectiveSecrets, maskedValuesOf, variablesOf } from '../domain/usecases/secrets.ts';
import type { DeployLog, DesiredService } from '../providers/provider.ts';
import { servedDomains, servingNames } from '../store/repositories/custom-domains.ts';
import { recordSnapshot } from '../store/repositories/deployments.ts';
import { recordRepoOps } from '../store/repositories/services.ts';
import type {
  DeploymentRow,
  EnvironmentRow,
  SecretRow,
  ServiceResourceRow,
  ServiceRow,
} from '../store/schema.ts';
import { gitAccessOf } from './git-access.ts';
import { readRepoOps } from './repo-ops.ts';
import { dependencyExports, provisionDependencies } from './resources.ts';

export interface DeploymentSubject {
  deployment: DeploymentRow;
  service: ServiceRow;
  environment: EnvironmentRow;
  /** Names the service is served under besides those recorded as deployed (a domain being cut over). */
  domains?: string[];
  /**
   * What the run's one read found besides (findDeploymentToRun): today's secrets, the deployed
   * domains, the dependencies. Absent (a restart, a rollback, a domain change), each is read here.
   */
  read?: { secrets: SecretRow[]; domains: string[]; resources: ServiceResourceRow[] };
}

export interface Resolving {
  signal: AbortSignal;
  log: DeployLog;
  /** Told every value the log must mask, before anything that might print it (secrets, git token, passwords). */
  mask?: (values: Iterable<string>) => void;
  /**
   * The deployment's own run: it records what it read (its ops config, commit and variables) so that a
   * rerun finds them, and brings the service's dependencies in line. Otherwise (a re-apply of the
   * deployment in place, with new domains) nothing is recorded or changed: the dependencies' exports
   * are read as they are.
   */
  run?: boolean;
}

/**
 * The one desired state of a deployment, as its deploy job, a restart, a rollback and a custom-domain
 * change all apply it: the service's spec, target, variables, ops config, domains, git credential and
 * generation (the fencing token), its dependencies made and their exports among its variables. A
 * deployment that has run (or a restore or restart, which copies one that has) runs with the ops config
 * and variables it recorded, not with today's: a rollback brings back the secrets as they were. A git
 * service's ops.json is read once, at the commit then built.
 */
export async function resolveDesiredState(
  deps: Pick<Deps, 'store' | 'secretBox' | 'provider'>,
  subject: DeploymentSubject,
  how: Resolving,
): Promise<DesiredService> {
  const { deployment, service } = subject;
  const { signal, log, mask = () => undefined } = how;
  const db = deps.store.db;
  const desired = await recordedStateOf(deps, subject);
  // Unrecorded variables are today's secrets, which is all there is to mask: no second read of them.
  if (how.mask)
    mask(
      deployment.variables_sealed
        ? await maskedValuesOf(db, deps.secretBox, deployment, subject.read?.secrets)
        : Object.values(desired.variables),
    );
  desired.git = await gitAccessOf(deps, service);
  // The git credential never reaches the log, whatever a driver or git might echo (reading the
  // repository's ops.json below clones it already).
  if (desired.git) mask([desired.git.password]);
  const read = deployment.ops_snapshot ? undefined : await readRepoOps(deps.provider, desired, signal, log);
  if (read) {
    desired.ops = read.ops;
    desired.target.commit_id = read.commit;
  }
  if (how.run) {
    const opsSnapshot = JSON.stringify(desired.ops);
    await recordSnapshot(db, deployment.id, {
      ops_snapshot: opsSnapshot,
      variables_sealed: deps.secretBox.seal(JSON.stringify(desired.variables)),
      ...(read ? { git_commit_ref: read.commit } : {}),
    });
    if (isGitSource(service.source)) await recordRepoOps(db, service.id, opsSnapshot);
  }
  // The new version starts only once its resources exist, with their exports resolved.
  const exported = how.run
    ? await provisionDependencies(
        deps,
        {
          service,
          environment: subject.environment,
          ops: desired.ops,
          ...(subject.read ? { existing: subject.read.resources } : {}),
        },
        signal,
        log,
      )
    : await dependencyExports(deps, { service, ops: desired.ops });
  mask(exported.passwords);
  desired.variables = { ...exported.variables, ...desired.variables };
  return desired;
}

/** What the deployment's row and its service's records say, before git, ops.json and dependencies. */
async function recordedStateOf(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  subject: DeploymentSubject,
): Promise<DesiredService> {
  const { deployment, service, environment, read } = subject;
  const db = deps.store.db;
  return {
    service,
    environment,
    deploymentId: deployment.id,
    generation: Number(deployment.generation),
    target: {
      commit_id: deployment.git_commit_ref,
      docker_image_tag: deployment.docker_image_tag,
      helm_chart_version: deployment.helm_chart_version,
      ...(deployment.git_commit_author && deployment.git_commit_ref
        ? { commit: { author: deployment.git_commit_author, message: deployment.git_commit_message } }
        : {}),
    },
    ops: deployment.ops_snapshot ? (JSON.parse(deployment.ops_snapshot) as OpsConfig) : opsConfigOf(service),
    variables: deployment.variables_sealed
      ? (JSON.parse(deps.secretBox.open(deployment.variables_sealed)) as Record<string, string>)
      : read
        ? variablesOf(read.secrets, deps.secretBox, environment.id, service.id)
        : await effectiveSecrets(db, deps.secretBox, environment.id, service.id),
    domains: read
      ? servingNames(read.domains, subject.domains)
      : await servedDomains(db, service.id, subject.domains),
  };
}

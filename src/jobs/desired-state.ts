import { type OpsConfig, opsConfigOf } from '../domain/ops-json.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { effectiveSecrets } from '../domain/usecases/secrets.ts';
import type { DesiredService } from '../providers/provider.ts';
import { servedDomains } from '../store/repositories/custom-domains.ts';
import { recordObservation } from '../store/repositories/observations.ts';
import type { DeploymentRow, EnvironmentRow, ServiceRow } from '../store/schema.ts';

/**
 * The desired state of a service as one plain value: what a deployment asks the provider to run (its
 * spec, target, variables, ops config, active domains) and its generation, the fencing token. `domains`
 * adds names not yet recorded as deployed (the custom domain being cut over). A deployment that has
 * run (or a restore or restart, which copies one that has) runs with the ops config and variables it
 * recorded, not with today's: a rollback brings back the secrets as they were.
 */
export async function desiredStateOf(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  input: { deployment: DeploymentRow; service: ServiceRow; environment: EnvironmentRow; domains?: string[] },
): Promise<DesiredService> {
  const { deployment, service, environment } = input;
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
      : await effectiveSecrets(db, deps.secretBox, environment.id, service.id),
    domains: await servedDomains(db, service.id, input.domains),
  };
}

/** Asks the provider what runs for the service and writes it back for the API to read. */
export async function observeInto(
  deps: Pick<Deps, 'store' | 'provider'>,
  service: ServiceRow,
): Promise<void> {
  await recordObservation(deps.store.db, service.id, await deps.provider.observe(service));
}

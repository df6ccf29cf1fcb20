import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { Db } from '../../store/database.ts';
import type { ServiceRow } from '../../store/schema.ts';
import type {
  DeployedSource,
  DeployRequest,
  DeployResult,
  EnvironmentIdentity,
  EnvironmentRef,
  Provider,
  RuntimeStatus,
} from '../provider.ts';
import { simIdentity } from './identity.ts';

/**
 * A simulated cloud. Each operation takes BERTH_SIM_STEP_MS per step, its world (what runs where) lives
 * in its own tables so that every process and every restart sees the same cloud, and every call is
 * recorded in sim_calls with its start, end and outcome.
 *
 * Deterministic failures, for building against failure paths:
 * - a deploy target (commit_id, docker_image_tag, helm_chart_version) that starts with `fail` fails;
 * - a service whose docker_image, repository name or chart name starts with `refuse` is refused at once.
 */
export class SimProvider implements Provider {
  readonly name = 'sim';
  private readonly db: Db;
  private readonly stepMs: number;
  private readonly caller = `${hostname()}:${process.pid}`;

  constructor(db: Db, stepMs: number) {
    this.db = db;
    this.stepMs = stepMs;
  }

  refuseDeploy(service: ServiceRow): string | null {
    const names = [
      service.docker_image,
      service.git_repo_full_name?.split('/').at(-1),
      service.helm_chart_name,
    ];
    const refused = names.find((n) => n?.startsWith('refuse'));
    return refused ? `the simulated cloud refuses ${refused}` : null;
  }

  private async record<T>(
    operation: string,
    subjectId: string,
    serviceId: string | null,
    work: () => Promise<{ value: T; outcome: string }>,
  ): Promise<T> {
    const call = await this.db
      .insertInto('sim_calls')
      .values({ operation, subject_id: subjectId, service_id: serviceId, worker: this.caller })
      .returning('id')
      .executeTakeFirstOrThrow();
    const { value, outcome } = await work();
    await this.db
      .updateTable('sim_calls')
      .set({ outcome, finished_at: sql`clock_timestamp()` })
      .where('id', '=', call.id)
      .execute();
    return value;
  }

  async provisionEnvironment(env: EnvironmentRef): Promise<void> {
    await this.record('provision_environment', env.id, null, async () => {
      await sleep(this.stepMs);
      return { value: undefined, outcome: 'available' };
    });
  }

  async environmentIdentity(env: EnvironmentRef): Promise<EnvironmentIdentity> {
    return simIdentity(env);
  }

  async deploy(request: DeployRequest): Promise<DeployResult> {
    const { service, target, deploymentId, environment } = request;
    const provDeploymentId = `sim-${deploymentId.slice(0, 8)}`;
    // Idempotent: a deployment this cloud already finished is reported, not run again.
    const done = await this.db
      .selectFrom('sim_calls')
      .select('outcome')
      .where('subject_id', '=', deploymentId)
      .where('operation', '=', 'deploy')
      .where('outcome', 'is not', null)
      .executeTakeFirst();
    const namespaceName = `env-${environment.id.slice(0, 8)}`;
    const source = deployedSource(request);
    const success = {
      ok: true as const,
      provDeploymentId,
      namespaceName,
      svcAlias: `${service.subdomain}.${namespaceName}.svc.cluster.local`,
      source,
    };
    if (done)
      return done.outcome === 'success'
        ? success
        : { ok: false, provDeploymentId, reason: done.outcome ?? '', source };

    return this.record<DeployResult>('deploy', deploymentId, service.id, async () => {
      await sleep(this.stepMs); // build or pull
      const name = target.commit_id || target.helm_chart_version || target.docker_image_tag;
      const refusal = this.refuseDeploy(service);
      const reason =
        refusal ??
        (name.startsWith('fail') ? `simulated failure: the target ${name} starts with "fail"` : null);
      if (reason) return { value: { ok: false as const, provDeploymentId, reason, source }, outcome: reason };
      await sleep(this.stepMs); // roll out
      const runStatus =
        service.type === 'job' ? 'completed' : service.type === 'cron' ? 'scheduled' : 'running';
      await this.db
        .insertInto('sim_workloads')
        .values({
          service_id: service.id,
          deployment_id: deploymentId,
          target: name || 'head',
          replicas: service.replica_count ?? 1,
          run_status: runStatus,
        })
        .onConflict((oc) =>
          oc.column('service_id').doUpdateSet((eb) => ({
            deployment_id: eb.ref('excluded.deployment_id'),
            target: eb.ref('excluded.target'),
            replicas: eb.ref('excluded.replicas'),
            run_status: eb.ref('excluded.run_status'),
            updated_at: sql`clock_timestamp()`,
          })),
        )
        .execute();
      return { value: success, outcome: 'success' };
    });
  }

  async status(service: ServiceRow): Promise<RuntimeStatus> {
    const workload = await this.db
      .selectFrom('sim_workloads')
      .select(['run_status', 'replicas'])
      .where('service_id', '=', service.id)
      .executeTakeFirst();
    if (!workload) return { run_status: service.is_deleted ? 'deleted' : 'not_deployed', ready_count: 0 };
    return {
      run_status: workload.run_status,
      ready_count: workload.run_status === 'running' ? workload.replicas : 0,
    };
  }

  async deleteService(service: ServiceRow): Promise<void> {
    await this.record('delete_service', service.id, service.id, async () => {
      await sleep(this.stepMs);
      await this.db.deleteFrom('sim_workloads').where('service_id', '=', service.id).execute();
      return { value: undefined, outcome: 'deleted' };
    });
  }

  domainValidationZone(_env: EnvironmentRef): string {
    return 'acm-validations.berth.test';
  }

  async attachDomain(service: ServiceRow, domain: { id: string; domain: string }) {
    return this.record('attach_domain', domain.id, service.id, async () => {
      await sleep(this.stepMs);
      return { value: { provCustomDomainId: `sim-cd-${domain.id.slice(0, 8)}` }, outcome: domain.domain };
    });
  }

  async detachDomain(service: ServiceRow, domain: { id: string; domain: string }): Promise<void> {
    await this.record('detach_domain', domain.id, service.id, async () => {
      await sleep(this.stepMs);
      return { value: undefined, outcome: domain.domain };
    });
  }

  async writeSecrets(
    scope: 'service' | 'environment',
    scopeId: string,
    values: Record<string, string>,
  ): Promise<void> {
    // Only the key count is recorded: values never leave the secrets table.
    await this.record('write_secrets', scopeId, scope === 'service' ? scopeId : null, async () => ({
      value: undefined,
      outcome: `${Object.keys(values).length} keys`,
    }));
  }

  // The simulated cloud has nothing to run beside the API.
  async startServing(): Promise<void> {}

  async close(): Promise<void> {}
}

const hex = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * What the simulated cloud "resolved" the target to, as a real one reports it: a git deployment names its
 * commit (the branch head gets a commit id of its own, stable per deployment) with an author and a
 * message; an image deployment the digest of its tag (stable per image and tag).
 */
function deployedSource({ service, target, deploymentId }: DeployRequest): DeployedSource {
  if (service.source === 'docker_image') {
    return {
      docker_image_digest: `sha256:${hex(`${service.docker_registry ?? ''}/${service.docker_image}:${target.docker_image_tag}`)}`,
    };
  }
  if (service.source === 'helm_chart') return {};
  const branch = service.git_repo_branch ?? 'main';
  const commit =
    target.commit_id || hex(`${service.git_repo_full_name}@${branch}#${deploymentId}`).slice(0, 40);
  return {
    git_commit_ref: commit,
    git_commit_author: 'Sim Developer <developer@sim.berth.test>',
    git_commit_message: `Simulated commit ${commit.slice(0, 7)} on ${branch}`,
  };
}

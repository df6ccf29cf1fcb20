import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { intSetting } from '../../config.ts';
import { repoUrl } from '../../domain/git-auth.ts';
import { resourceName } from '../../domain/resource-names.ts';
import { isGitSource } from '../../domain/service-fields.ts';
import { SupersededError, TerminalError } from '../../jobs/errors.ts';
import { branchHead } from '../../jobs/git-head.ts';
import type { Db } from '../../store/database.ts';
import {
  type Admission,
  type Applied,
  type DependencyBackups,
  type DeployedSource,
  DeployFailed,
  type DeployLog,
  type DeployTarget,
  type DesiredService,
  type EnvironmentIdentity,
  type EnvironmentRef,
  type Observed,
  type Provider,
  type ProvisionedResource,
  REMOVED_GENERATION,
  type ResourceKey,
  type Resources,
  type RuntimeSpec,
  type SecretStore,
  type ServiceLogs,
  type ServiceMetrics,
  type ServiceRef,
  SILENT_LOG,
  type Sources,
} from '../provider.ts';
import { SimCronRequests } from './cron-requests.ts';
import { simIdentity } from './identity.ts';
import { SimLogs } from './logs.ts';
import { SimMetrics } from './metrics.ts';
import { SIM_RESOURCE_STEPS, simAttributes } from './resources.ts';
import { applyState, beginCall, endCall, moveWorkload, workloadOf } from './statements.ts';
import { type SimDb, simTables } from './tables.ts';

/** The sim driver's settings, from the environment. */
export interface SimSettings {
  /** Time one simulated step takes (BERTH_SIM_STEP_MS). */
  stepMs: number;
  /**
   * BERTH_GIT_BASE_URL when it is set: a branch head is then read from the repository there (or the
   * service's connection's host) where it answers. Unset, every head is simulated: nothing is asked of
   * github.com.
   */
  gitBaseUrl: string | null;
}

export function simSettings(env: NodeJS.ProcessEnv): SimSettings {
  return {
    stepMs: intSetting(env, 'BERTH_SIM_STEP_MS', 500, 0, 600_000),
    gitBaseUrl: env.BERTH_GIT_BASE_URL || null,
  };
}

/** How long the sim waits for a repository's head before it simulates one. */
const HEAD_TIMEOUT_MS = 10_000;
const HEADS_KEPT = 1000;

/** The simulated cloud refuses services named `refuse...` at once (see SimProvider). */
function simRefusal(service: RuntimeSpec): string | null {
  const names = [
    service.docker_image,
    service.git_repo_full_name?.split('/').at(-1),
    service.helm_chart_name,
  ];
  const refused = names.find((n) => n?.startsWith('refuse'));
  return refused ? `the simulated cloud refuses ${refused}` : null;
}

/**
 * A simulated cloud. Each operation takes BERTH_SIM_STEP_MS per step, its world (what runs where, at
 * which generation) lives in its own tables so that every process and every restart sees the same
 * cloud, and every call is recorded in sim_calls with its start, end and outcome.
 *
 * Deterministic failures, for building against failure paths:
 * - a deploy target (commit_id, docker_image_tag, helm_chart_version) that starts with `fail` fails;
 * - a service whose docker_image, repository name or chart name starts with `refuse` is refused at once;
 * - a job whose run_command ends in `exit N` exits with code N, as its shell would: a non-zero code
 *   fails the deployment with `the job exited with code N`, and the job observes as `failed`.
 */
export class SimProvider implements Provider {
  private readonly db: SimDb;
  private readonly stepMs: number;
  private readonly gitBaseUrl: string | null;
  /** The commit each `{}` deployment resolved to, so that its ops.json and its build name the same one. */
  private readonly heads = new Map<string, Promise<string>>();
  private readonly caller = `${hostname()}:${process.pid}`;
  readonly secrets: SecretStore;
  readonly logs: ServiceLogs;
  readonly metrics: ServiceMetrics;
  readonly serving: SimCronRequests;

  /** `alone`: the embedded database, which no other process writes (cron-requests.ts). */
  constructor(db: Db, settings: SimSettings, options: { alone?: boolean } = {}) {
    this.db = simTables(db);
    this.serving = new SimCronRequests(this.db, this.caller, options);
    this.stepMs = settings.stepMs;
    this.gitBaseUrl = settings.gitBaseUrl;
    this.logs = new SimLogs(this.db);
    this.metrics = new SimMetrics(this.db);
    this.secrets = {
      // A write replaces the scope's whole set. Only digests are kept: values never leave the secrets table.
      write: (scope, scopeId, values) =>
        this.record('write_secrets', scopeId, scope === 'service' ? scopeId : null, async () => {
          await this.db.transaction().execute(async (trx) => {
            await trx
              .deleteFrom('sim_secrets')
              .where('scope', '=', scope)
              .where('scope_id', '=', scopeId)
              .execute();
            const rows = Object.entries(values).map(([name, value]) => ({
              scope,
              scope_id: scopeId,
              name,
              digest: hex(value),
            }));
            if (rows.length > 0) await trx.insertInto('sim_secrets').values(rows).execute();
          });
          return { outcome: `${Object.keys(values).length} keys` };
        }),
    };
  }

  readonly admission: Admission = { refusal: simRefusal };
  /** No ingress: Berth records custom domains' certificates as a CA would issue them. */
  readonly certificates = 'simulated' as const;

  /**
   * Each resource takes its kind's steps to make; a prefix starting with `fail` fails (deterministic,
   * as for deploy targets). Made at most once: its row is the cloud's record of it, and a call that finds
   * it with the same spec returns it as it is.
   */
  readonly resources: Resources = {
    ensure: async ({ service, environment, resource }, signal): Promise<ProvisionedResource> => {
      const key = `${resource.kind}.${resource.type}`;
      const steps = SIM_RESOURCE_STEPS[key];
      if (steps === undefined) {
        throw new TerminalError(`the simulated cloud cannot provision ${resource.kind} ${resource.type}`);
      }
      const spec = { prefix: resource.prefix, properties: resource.properties };
      const find = () =>
        this.db
          .selectFrom('sim_resources')
          .selectAll()
          .where('service_id', '=', service.id)
          .where('kind', '=', resource.kind)
          .where('type', '=', resource.type)
          .where('resource_id', '=', resource.id)
          .executeTakeFirst();
      const existing = await find();
      const made = (row: NonNullable<typeof existing>) => ({
        attributes: row.attributes,
        ...(row.password ? { password: row.password } : {}),
      });
      if (existing?.prefix === resource.prefix && isDeepStrictEqual(existing.spec, spec))
        return made(existing);
      signal.throwIfAborted();
      const operation = existing ? 'update_resource' : 'create_resource';
      await this.record(operation, service.id, service.id, async () => {
        for (let i = 0; i < steps; i++) await sleep(this.stepMs);
        if (resource.prefix.startsWith('fail')) {
          const reason = `simulated failure: the ${key} prefix ${resource.prefix} starts with "fail"`;
          return { outcome: reason, error: new TerminalError(reason) };
        }
        signal.throwIfAborted();
        const { attributes, password } = simAttributes(environment, service, resource);
        await this.db
          .insertInto('sim_resources')
          .values({
            service_id: service.id,
            kind: resource.kind,
            type: resource.type,
            resource_id: resource.id,
            prefix: resource.prefix,
            spec: JSON.stringify(spec),
            attributes: JSON.stringify(attributes),
            password: password ?? null,
          })
          .onConflict((oc) =>
            // An update keeps the password it was made with.
            oc.columns(['service_id', 'kind', 'type', 'resource_id']).doUpdateSet({
              prefix: resource.prefix,
              spec: JSON.stringify(spec),
              attributes: JSON.stringify(attributes),
            }),
          )
          .execute();
        return { outcome: `${key} ${resource.id}` };
      });
      const row = await find();
      if (!row) throw new Error(`the simulated ${key} ${resource.id} vanished while it was made`);
      return made(row);
    },
    delete: async (service: ServiceRef, resource: ResourceKey): Promise<void> => {
      await this.record('delete_resource', service.id, service.id, async () => {
        await sleep(this.stepMs);
        await this.db
          .deleteFrom('sim_resources')
          .where('service_id', '=', service.id)
          .where('kind', '=', resource.kind)
          .where('type', '=', resource.type)
          .where('resource_id', '=', resource.id)
          .execute();
        return { outcome: `${resource.kind}.${resource.type} ${resource.id}` };
      });
    },
  };

  /**
   * Backups take two steps and report a plausible size (stable per backup); restores one step per
   * service stopped plus one; a release is recorded with the services it starts. A dependency whose id
   * starts with `failbackup` fails its backups (deterministic, as `fail` prefixes do for resources).
   * Every call is recorded in sim_calls.
   */
  readonly backups: DependencyBackups = {
    backup: async ({ service, environment, resource, backupId }, signal) => {
      const location = `sim://${environment.id}/${resourceName(service.id, resource)}/${backupId}.dump`;
      let sizeBytes = 0;
      await this.record('backup_dependency', backupId, service.id, async () => {
        await sleep(this.stepMs);
        signal.throwIfAborted();
        if (resource.id.startsWith('failbackup')) {
          throw new TerminalError(
            `the simulated backup target is full: no space left for ${resource.kind} ${resource.type} ${resource.id}`,
          );
        }
        await sleep(this.stepMs);
        // Between 1 and 64 MiB, as small databases' dumps are.
        sizeBytes = (1 + (Number.parseInt(backupId.replace(/-/g, '').slice(0, 6), 16) % 64)) * 1_048_576;
        return { outcome: `${sizeBytes} bytes` };
      });
      return { location, sizeBytes };
    },
    restore: async ({ service, environment, resource, backupId, stop, into }, signal) => {
      await this.record('restore_dependency', backupId, service.id, async () => {
        for (let i = 0; i <= stop.length; i++) await sleep(this.stepMs);
        signal.throwIfAborted();
        return {
          outcome: `restored into ${into}; stopped ${stop.map((s) => s.id).join(', ') || 'nothing'}`,
        };
      });
      if (into === 'same') return {};
      // A copy is a resource of its own: named from the prefix, as the dependency is.
      const copy = simAttributes(environment, service, { ...resource, prefix: `${resource.prefix}-restore` });
      return { attributes: copy.attributes };
    },
    discard: async (_environment, location) => {
      const backupId = (location.split('/').pop() ?? '').replace(/\.dump$/, '');
      await this.record('discard_backup', backupId, null, async () => ({
        outcome: location,
      }));
    },
    release: async (environment, services) => {
      await this.record('release_restore_hold', environment.id, null, async () => ({
        outcome: `started ${services.map((s) => s.id).join(', ')}`,
      }));
    },
  };

  /**
   * The simulated git host: a commit's file is its own row, else the repository's row for every commit
   * (`commit_id` ''). The branch head resolves to the commit the deployment then reports building.
   */
  readonly sources: Sources = {
    readFile: async ({ service, target, deploymentId, path, git }) => {
      // As a real checkout refuses it (the seam's rule): else the sim would deploy such a service
      // without its ops.json where docker and swarm fail it.
      const inner = posix.normalize(path);
      if (posix.isAbsolute(inner) || inner === '..' || inner.startsWith('../'))
        throw new TerminalError(`ops_json_path ${path} is outside the repository`);
      const commit = await this.commitOf({ service, target, deploymentId, ...(git ? { git } : {}) });
      const rows = await this.db
        .selectFrom('sim_repository_files')
        .select(['commit_id', 'content'])
        .where('repo', '=', service.git_repo_full_name ?? '')
        .where('path', '=', path.replace(/^(\.\/)+/, ''))
        .where('commit_id', 'in', [commit, ''])
        .execute();
      const row = rows.find((r) => r.commit_id === commit) ?? rows[0];
      return { commit, text: row?.content ?? null };
    },
  };

  /**
   * The commit a git deployment runs: the one it names; for `{}`, the branch's real head where
   * BERTH_GIT_BASE_URL is set and the repository answers `git ls-remote`, else a simulated one.
   */
  private commitOf({
    service,
    target,
    deploymentId,
    git,
  }: Pick<DesiredService, 'service' | 'target' | 'deploymentId' | 'git'>): Promise<string> {
    if (target.commit_id || !this.gitBaseUrl)
      return Promise.resolve(simCommit(service, target, deploymentId));
    let head = this.heads.get(deploymentId);
    if (!head) {
      const url = repoUrl(git?.baseUrl ?? this.gitBaseUrl, service.git_repo_full_name ?? '');
      head = branchHead(url, service.git_repo_branch ?? 'main', git, HEAD_TIMEOUT_MS)
        .catch(() => undefined)
        .then((real) => real ?? simCommit(service, target, deploymentId));
      // The oldest goes first: Maps keep insertion order.
      if (this.heads.size >= HEADS_KEPT) this.heads.delete(this.heads.keys().next().value as string);
      this.heads.set(deploymentId, head);
    }
    return head;
  }

  /**
   * Runs one call, recorded with its outcome; a failed call is recorded, then thrown. A call whose work
   * recorded its outcome itself (`recorded`, in the statement of its last change) is not recorded again.
   */
  private async record(
    operation: string,
    subjectId: string,
    serviceId: string | null,
    work: (callId: string) => Promise<{ outcome: string; error?: Error; recorded?: true }>,
  ): Promise<void> {
    const call = await beginCall.executeTakeFirst(this.db, {
      row: { operation, subject_id: subjectId, service_id: serviceId, worker: this.caller },
    });
    if (!call) throw new Error('the simulated call was not recorded');
    // A call cut short (the worker lost its job) is recorded as such, then rethrown.
    const { outcome, error, recorded } = await work(call.id).catch(
      (cause: Error): { outcome: string; error: Error; recorded?: true } => ({
        outcome: `aborted: ${cause.message}`,
        error: cause,
      }),
    );
    if (!recorded) await endCall.execute(this.db, { id: call.id, outcome });
    if (error) throw error;
  }

  async ensureEnvironment(env: EnvironmentRef): Promise<void> {
    await this.record('provision_environment', env.id, null, async () => {
      await sleep(this.stepMs);
      return { outcome: 'available' };
    });
  }

  async identity(env: EnvironmentRef): Promise<EnvironmentIdentity> {
    return simIdentity(env);
  }

  async apply(desired: DesiredService, signal: AbortSignal, log: DeployLog = SILENT_LOG): Promise<Applied> {
    const { service, target, deploymentId, environment, generation } = desired;
    const namespaceName = `env-${environment.id.slice(0, 8)}`;
    const source = deployedSource(desired, isGitSource(service.source) ? await this.commitOf(desired) : '');
    const applied: Applied = {
      provDeploymentId: `sim-${deploymentId.slice(0, 8)}`,
      namespaceName,
      svcAlias: `${service.subdomain}.${namespaceName}.svc.cluster.local`,
      source,
    };
    // Idempotent: a deployment this cloud already finished is reported, not run again. A call cut short
    // because its worker lost the job changed nothing and decides nothing: the next holder runs it.
    // With the generation in place, in the same statement.
    const state = await applyState.executeTakeFirst(this.db, { deploymentId, serviceId: service.id });
    const done = state?.done ?? null;
    const in_place = state?.in_place ?? null;
    if (done !== null) {
      if (done === 'success') return applied;
      throw done === 'superseded'
        ? new SupersededError(`generation ${generation} was superseded`)
        : new DeployFailed(done, source);
    }
    const inPlace = in_place === null ? null : Number(in_place);
    if (inPlace !== null && inPlace > generation) {
      throw new SupersededError(`generation ${inPlace} is in place; ${generation} is older`);
    }
    signal.throwIfAborted();

    await this.record('deploy', deploymentId, service.id, async (callId) => {
      const name = target.commit_id || target.helm_chart_version || target.docker_image_tag;
      const step = service.source === 'docker_image' || service.source === 'helm_chart' ? 'pull' : 'build';
      logSource(log, desired, source);
      await sleep(this.stepMs); // build or pull
      const reason =
        simRefusal(service) ??
        (name.startsWith('fail') ? `simulated failure: the target ${name} starts with "fail"` : null);
      if (reason) {
        log.end(step, 'failed', reason);
        return { outcome: reason, error: new DeployFailed(reason, source) };
      }
      log.end(step, 'success', step === 'pull' ? `Pulled ${name}` : 'Successfully built the image');
      log.mark('image_resolved');
      const replicas = service.replica_count ?? 1;
      for (let i = 0; i < replicas; i++) log.line('rollout', `Replica ${i} created`);
      await sleep(this.stepMs); // roll out
      // A worker that lost the job stops here: the one that took it over decides.
      signal.throwIfAborted();
      const exitCode = service.type === 'job' ? simExitCode(service.run_command) : 0;
      const failure = exitCode === 0 ? null : `the job exited with code ${exitCode}`;
      if (failure) log.end('rollout', 'failed', failure);
      else log.end('rollout', 'success', `${replicas} of ${replicas} replicas healthy`);
      const runStatus =
        service.type === 'job'
          ? failure
            ? 'failed'
            : 'completed'
          : service.type === 'cron'
            ? 'scheduled'
            : 'running';
      const variables = Object.fromEntries(
        Object.entries(desired.variables).map(([name, value]) => [name, hex(value)]),
      );
      // Fenced: the row changes only if what is in place is not newer (the check above may be stale).
      // The call's outcome is recorded in the same statement: superseded when the row did not change.
      const moved = await moveWorkload.executeTakeFirst(this.db, {
        row: {
          service_id: service.id,
          deployment_id: deploymentId,
          target: name || 'head',
          replicas: service.replica_count ?? 1,
          run_status: runStatus,
          generation,
          cron_jobs: JSON.stringify(
            desired.ops.cron_jobs.map((job) => ({
              ...job,
              url: `http://${applied.svcAlias}:${service.port ?? 80}${job.path}`,
            })),
          ),
          variables: JSON.stringify(variables),
        },
        callId,
        outcome: failure ?? 'success',
      });
      if (moved) this.serving.moved(service.id, desired.ops.cron_jobs.length);
      if (!moved) {
        log.end(
          'traffic',
          'failed',
          `A newer generation than ${generation} is in place: traffic stays there`,
        );
        return {
          outcome: 'superseded',
          error: new SupersededError(`a newer generation than ${generation} is in place`),
          recorded: true,
        };
      }
      // A job that ran and failed is in place (it observes as failed) and fails its deployment.
      if (failure) return { outcome: failure, error: new DeployFailed(failure, source), recorded: true };
      log.mark('routed');
      log.end('traffic', 'success', `Traffic moved to this deployment (generation ${generation})`);
      log.end('drain', 'success', 'The previous version was drained');
      return { outcome: 'success', recorded: true };
    });
    return applied;
  }

  async observe(service: ServiceRef): Promise<Observed> {
    const workload = await workloadOf.executeTakeFirst(this.db, { serviceId: service.id });
    if (!workload) return { run_status: 'not_deployed', ready_count: 0, generation: null };
    const removed = Number(workload.generation) === REMOVED_GENERATION;
    return {
      run_status: workload.run_status,
      ready_count: workload.run_status === 'running' ? workload.replicas : 0,
      generation: removed ? null : Number(workload.generation),
    };
  }

  async remove(service: ServiceRef): Promise<void> {
    await this.record('delete_service', service.id, service.id, async () => {
      await sleep(this.stepMs);
      // A tombstone rather than nothing: a stale apply of any generation cannot bring the service back.
      const tombstone = {
        deployment_id: service.id,
        target: '',
        replicas: 0,
        run_status: 'deleted',
        generation: REMOVED_GENERATION,
        cron_jobs: '[]',
        variables: '{}',
      };
      await this.db
        .insertInto('sim_workloads')
        .values({ service_id: service.id, ...tombstone })
        .onConflict((oc) => oc.column('service_id').doUpdateSet(tombstone))
        .execute();
      this.serving.moved(service.id, 0);
      return { outcome: 'deleted' };
    });
  }

  domainValidationZone(_env: EnvironmentRef): string {
    return 'acm-validations.berth.test';
  }

  /** Stops serving, as the other drivers' close does: a process that closes its provider is done with it. */
  async close(): Promise<void> {
    await this.serving.stop();
  }
}

/** What a real build or pull prints, in the simulated cloud's words. */
function logSource(log: DeployLog, { service, target }: DesiredService, source: DeployedSource): void {
  if (service.source === 'docker_image') {
    const image = `${service.docker_registry ? `${service.docker_registry}/` : ''}${service.docker_image}`;
    log.end(
      'source',
      'success',
      `Image ${image}:${target.docker_image_tag} is ${source.docker_image_digest}`,
    );
    log.line('pull', `Pulling ${image}:${target.docker_image_tag}`);
    log.line('pull', `Digest: ${source.docker_image_digest}`);
  } else if (service.source === 'helm_chart') {
    log.end('source', 'success', `Chart ${service.helm_chart_name} ${target.helm_chart_version || 'latest'}`);
    log.line('pull', `Fetching chart ${service.helm_chart_repo}/${service.helm_chart_name}`);
  } else {
    const what = source.git_commit_author
      ? `by ${source.git_commit_author}: ${source.git_commit_message}`
      : `(the head of ${service.git_repo_branch ?? 'main'}, read from the repository)`;
    log.end('source', 'success', `Commit ${source.git_commit_ref} ${what}`);
    log.line('build', `#1 [internal] load build definition from ${service.dockerfile_path || 'Dockerfile'}`);
    log.line('build', '#2 [build 1/2] COPY . /app');
    log.line('build', '#3 [build 2/2] RUN make');
  }
}

const hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** The code a job's run_command exits with: N when its last command is `exit N`, else 0. */
function simExitCode(runCommand: string | null): number {
  const code = /(?:^|[;&|\n])\s*exit\s+(\d+)\s*;?\s*$/.exec(runCommand ?? '')?.[1];
  return code === undefined ? 0 : Number(code) % 256;
}

/** The commit a git target names: the branch head is a commit id of its own, stable per deployment. */
function simCommit(service: RuntimeSpec, target: DeployTarget, deploymentId: string): string {
  const branch = service.git_repo_branch ?? 'main';
  return target.commit_id || hex(`${service.git_repo_full_name}@${branch}#${deploymentId}`).slice(0, 40);
}

/**
 * What the simulated cloud "resolved" the target to, as a real one reports it: a git deployment names its
 * commit (`commit`: one a push named keeps the author and message the git host gave; a simulated head
 * gets a simulated author and message; a real one read with ls-remote has none the sim could know); an
 * image deployment the digest of its tag (stable per image and tag).
 */
function deployedSource({ service, target, deploymentId }: DesiredService, commit: string): DeployedSource {
  if (service.source === 'docker_image') {
    return {
      docker_image_digest: `sha256:${hex(`${service.docker_registry ?? ''}/${service.docker_image}:${target.docker_image_tag}`)}`,
    };
  }
  if (service.source === 'helm_chart') return {};
  const branch = service.git_repo_branch ?? 'main';
  if (commit !== simCommit(service, target, deploymentId)) return { git_commit_ref: commit };
  // The commit a push named: its author and message as the git host told them.
  if (target.commit && commit === target.commit_id) {
    return {
      git_commit_ref: commit,
      git_commit_author: target.commit.author,
      git_commit_message: target.commit.message,
    };
  }
  return {
    git_commit_ref: commit,
    git_commit_author: 'Sim Developer <developer@sim.berth.test>',
    git_commit_message: `Simulated commit ${commit.slice(0, 7)} on ${branch}`,
  };
}

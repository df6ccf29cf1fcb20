import { setTimeout as sleep } from 'node:timers/promises';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { SupersededError, TerminalError } from '../../jobs/errors.ts';
import type { Db } from '../../store/database.ts';
import { ENGINE_CALL_MS, engineDeadline } from '../engine/deadlines.ts';
import { EngineDriver } from '../engine/engine-driver.ts';
import { ensureNetwork } from '../engine/environment.ts';
import { buildFromGit } from '../engine/git-build.ts';
import { digestOf, engineError, imageOf, pushImage } from '../engine/images.ts';
import type { RouteTarget } from '../engine/ingress.ts';
import { LABEL, labelFilter, labelsOf, type Role } from '../engine/labels.ts';
import type { LogOptions, LogSource } from '../engine/logs.ts';
import type { Prepared, Resolved, Run, Strategies } from '../engine/rollout.ts';
import { NOT_DEPLOYED, rolloutFailed } from '../engine/rollout.ts';
import type { Schedules } from '../engine/schedules.ts';
import type { DeployedSource, DeployLog, DesiredService, EnvironmentRef, ServiceRef } from '../provider.ts';
import { DeployFailed } from '../provider.ts';
import { swarmCron } from './cron.ts';
import { SwarmDependencyBackups } from './dependency-backups.ts';
import { SwarmMetrics } from './metrics.ts';
import { requestTask } from './ops-cron.ts';
import { SwarmResources } from './resources.ts';
import { type Launch, launchOf, sweepSecrets } from './secrets.ts';
import {
  cronTemplateName,
  failedTasks,
  jobName,
  ofDeployment,
  overlayName,
  running,
  servingName,
  servingSpec,
  type Task,
  taskErrors,
  tasksOf,
  taskTemplate,
} from './services.ts';
import type { SwarmSettings } from './settings.ts';
import { type SwarmDb, swarmTables } from './tables.ts';

/**
 * The swarm reports task states only when asked: the first look goes at once, then the pause doubles
 * from FIRST_POLL_MS up to MAX_POLL_MS (a rollout that is quick is seen quickly, a long one costs few reads).
 */
const FIRST_POLL_MS = 20;
const MAX_POLL_MS = 500;
const nextPause = (pause: number) => Math.min(pause * 2, MAX_POLL_MS);

/** A swarm rollout's prepared version: with its launch (its variables as swarm secrets). */
type Launched = Prepared & { launch: Launch };

export interface SwarmProviderOptions {
  db: Db;
  logger: Logger;
  settings: SwarmSettings;
}

/**
 * Docker Engine in swarm mode, through a manager's Engine API: the swarm keeps the desired state (in
 * Raft, on the managers), places and reschedules replicas over the nodes and rolls updates; Berth tells
 * it what to run and follows the task list. One overlay network per environment; one swarm service per
 * web, internal or worker service (updated in place by each rollout); a replicated-job service per job
 * deployment; a template per cron deployment, run by Berth's scheduler (cron.ts). Routing, generations
 * and the ingress are shared with the docker driver (engine/routes.ts, engine/ingress.ts).
 */
export class SwarmProvider extends EngineDriver<Launched, SwarmSettings, SwarmDb> {
  protected readonly driver = 'swarm';
  protected readonly cron: Schedules;
  protected readonly opsCronRequest = requestTask(this.docker, this.settings.requestImage, this.logger);
  readonly resources: SwarmResources;
  readonly backups: SwarmDependencyBackups;
  readonly metrics: SwarmMetrics;

  constructor(options: SwarmProviderOptions) {
    const { settings, logger } = options;
    super({ settings, logger, docker: new Docker(settings.engine), db: swarmTables(options.db) });
    this.metrics = new SwarmMetrics(this.docker, this.traffic, settings.nodeEngines);
    this.cron = swarmCron(this.docker, this.db, logger);
    this.resources = new SwarmResources(this.docker, this.db, settings, (env) => this.ensureNetwork(env));
    this.backups = new SwarmDependencyBackups(
      this.docker,
      settings.backupDir,
      this.resources,
      settings.pullTimeoutMs,
    );
  }

  protected async ensureNetwork(env: EnvironmentRef): Promise<string> {
    // Attachable: Berth's own containers join it (dependency backups' helpers, on the manager).
    return ensureNetwork(this.docker, env, overlayName(env.id), {
      Driver: 'overlay',
      Attachable: true,
      Options: this.settings.encryptNetworks ? { encrypted: 'true' } : {},
    }).catch((error: unknown) => {
      throw engineError(error, 'the swarm refused the network');
    });
  }

  /** The swarm services of a Berth service (its serving one, its jobs, its cron templates and runs). */
  private async servicesOf(serviceId: string, role?: Role) {
    return this.docker.listServices({
      filters: labelFilter({
        [LABEL.managed]: 'true',
        [LABEL.service]: serviceId,
        ...(role ? { [LABEL.role]: role } : {}),
      }),
    });
  }

  private async removeService(idOrName: string): Promise<void> {
    await this.docker
      .getService(idOrName)
      .remove()
      .catch((error: { statusCode?: number }) => {
        if (error.statusCode !== 404) throw error;
      });
  }

  // Whatever the outcome, the variables of versions nothing runs any more leave the swarm. A failed sweep
  // costs no deployment: the next one (or the service's deletion) takes them.
  protected override async settled(desired: DesiredService): Promise<void> {
    await sweepSecrets(this.docker, desired.service.id, desired.generation + 1).catch((error: Error) =>
      this.logger.warn({ service: desired.service.id, err: error }, 'secret sweep failed'),
    );
  }

  /** A cancelled first rollout leaves nothing; a cancelled update is rolled back by the swarm. */
  protected async cancelled(desired: DesiredService): Promise<void> {
    const { service, deploymentId } = desired;
    await this.removeService(jobName(deploymentId));
    await this.removeService(cronTemplateName(deploymentId));
    const serving = await this.inspect(servingName(service.id));
    if (serving?.Spec?.Labels?.[LABEL.deployment] !== deploymentId) return;
    if (serving.PreviousSpec) await this.rollBack(serving);
    else await this.removeService(serving.ID);
  }

  private async inspect(name: string): Promise<Docker.Service | null> {
    return this.docker
      .getService(name)
      .inspect()
      .catch((error: { statusCode?: number }) => {
        if (error.statusCode === 404) return null;
        throw error;
      });
  }

  private async rollBack(service: Docker.Service): Promise<void> {
    await this.docker
      .getService(service.ID)
      .update({ ...service.Spec, version: service.Version?.Index, rollback: 'previous' });
  }

  /** What the swarm driver gives the shared rollout (engine/rollout.ts): a strategy per service type. */
  protected readonly strategies: Strategies<Launched> = {
    job: {
      start: async (desired, run, signal, log) => {
        const name = jobName(desired.deploymentId);
        if (!(await this.inspect(name))) {
          await this.create({
            Name: name,
            Labels: labelsOf(desired, 'job'),
            TaskTemplate: this.template(desired, run, 'job'),
            Mode: { ReplicatedJob: { MaxConcurrent: 1, TotalCompletions: 1 } },
          });
        }
        log.line('rollout', `Job service ${name} created`);
        await this.waitJob(name, run.deadline, signal, run.source, log);
      },
      retire: async (desired, after, _signal, log) => {
        await this.retireOlder(desired.service.id, desired.generation);
        await this.jobOutcome(desired.deploymentId, after.source, log);
      },
      observe: async (service, route) => {
        if (!route || (await this.servicesOf(service.id)).length === 0) return NOT_DEPLOYED;
        const tasks = await tasksOf(this.docker, jobName(route.deployment_id));
        const status =
          tasks.length === 0
            ? 'not_deployed'
            : tasks.some((t) => t.Status.State === 'complete')
              ? 'completed'
              : failedTasks(tasks).length > 0
                ? 'failed'
                : 'running';
        return { run_status: status, ready_count: 0 };
      },
    },
    cron: {
      start: async (desired, run, _signal, log) => {
        const { service } = desired;
        const name = cronTemplateName(desired.deploymentId);
        if (!(await this.inspect(name))) {
          await this.create({
            Name: name,
            Labels: {
              ...labelsOf(desired, 'cron-template'),
              [LABEL.cronSchedule]: service.cron_schedule ?? '',
            },
            TaskTemplate: this.template(desired, run, 'cron-run'),
            Mode: { Replicated: { Replicas: 0 } },
          });
        }
        log.end(
          'rollout',
          'success',
          `Cron template ${name} created: runs on "${service.cron_schedule ?? ''}"`,
        );
      },
      retire: async (desired) => {
        await this.retireOlder(desired.service.id, desired.generation);
        await this.cron.rescan();
      },
      observe: async (service, route) => {
        const templates = route ? await this.servicesOf(service.id, 'cron-template') : [];
        return templates.length > 0 ? { run_status: 'scheduled', ready_count: 0 } : NOT_DEPLOYED;
      },
    },
    serving: {
      start: (desired, run, signal, log) => this.updateServing(desired, run, signal, log),
      retire: (desired) =>
        this.retireOlder(desired.service.id, desired.generation, servingName(desired.service.id)),
      // A serving service that is gone has no tasks to list.
      observe: async (service, route) => {
        if (!route) return NOT_DEPLOYED;
        const tasks = await tasksOf(this.docker, servingName(service.id)).catch(() => [] as Task[]);
        const ready = running(tasks).length;
        const wanted = tasks.some((t) => t.DesiredState === 'running');
        return {
          run_status: ready > 0 ? 'running' : wanted ? 'stopped' : 'not_deployed',
          ready_count: ready,
        };
      },
    },
  };

  protected async standDown(desired: DesiredService): Promise<void> {
    await this.removeService(jobName(desired.deploymentId));
    await this.removeService(cronTemplateName(desired.deploymentId));
  }

  /** A rollout's image (by digest), network and launch (its variables as swarm secrets). */
  protected async prepare(desired: DesiredService, log: DeployLog): Promise<Launched> {
    const network = await this.ensureNetwork(desired.environment);
    const resolved = await this.resolveImage(desired, log);
    const launch = await launchOf(
      this.docker,
      desired,
      resolved.image,
      this.settings.pullTimeoutMs,
      log,
    ).catch((error: Error) => {
      log.end('rollout', 'failed', error.message);
      throw error;
    });
    return { ...resolved, network, launch };
  }

  private template(desired: DesiredService, run: Run<Launched>, role: Role): Docker.ContainerTaskSpec {
    return taskTemplate(desired, run.image, run.ops, role, run.network, run.svcAlias, run.launch);
  }

  /**
   * The serving service created, or updated by the swarm's own rolling update, until every replica of
   * this deployment runs healthy; one that does not is removed (a first version) or rolled back.
   */
  private async updateServing(
    desired: DesiredService,
    run: Run<Launched>,
    signal: AbortSignal,
    log: DeployLog,
  ): Promise<void> {
    const { service, deploymentId, generation } = desired;
    const spec = servingSpec(desired, this.template(desired, run, 'replica'), this.settings.monitorSeconds);
    const current = await this.inspect(spec.Name as string);
    if (current) {
      const inPlace = Number(current.Spec?.Labels?.[LABEL.generation] ?? 0);
      if (inPlace > generation)
        throw new SupersededError(`generation ${inPlace} is in place; ${generation} is older`);
    }
    // An update replaces a version that serves; a rerun after a crash may find its own spec in place
    // (an update when it has a previous spec, the first version when not).
    const updating =
      current?.Spec?.Labels?.[LABEL.deployment] !== deploymentId || Boolean(current?.PreviousSpec);
    const isUpdate = Boolean(current) && updating;
    // The swarm's own rolling update: the version check refuses a write based on a stale read.
    if (current && current.Spec?.Labels?.[LABEL.deployment] !== deploymentId) {
      await this.docker
        .getService(current.ID)
        .update({ ...spec, version: current.Version?.Index })
        .catch((error: unknown) => {
          throw engineError(error, 'the swarm refused the service update');
        });
      log.mark('container_created');
      log.line('rollout', `Rolling update of ${spec.Name} started (start-first, one replica at a time)`);
    } else if (!current) {
      await this.create(spec);
      log.mark('container_created');
      log.line('rollout', `Service ${spec.Name} created with ${service.replica_count ?? 1} replicas`);
    }
    const outcome = await this.waitServing(desired, isUpdate, run.deadline, signal, log);
    if (!outcome.ok) {
      const kept = isUpdate ? ' The swarm rolled back: the previous version keeps serving.' : '';
      if (!isUpdate) await this.removeService(spec.Name as string);
      else await this.rollBackIfUpdating(spec.Name as string);
      throw rolloutFailed(
        log,
        `the new version did not become healthy: ${outcome.reason}.${kept}`,
        run.source,
      );
    }
    log.end('rollout', 'success', `${outcome.ready} of ${outcome.ready} replicas running and healthy`);
  }

  /** A swarm still updating past the deadline is told to roll back; one that rolled back already is left. */
  private async rollBackIfUpdating(name: string): Promise<void> {
    const service = await this.inspect(name);
    if (service?.UpdateStatus?.State === 'updating') await this.rollBack(service);
  }

  private async create(spec: Docker.ServiceSpec): Promise<void> {
    await this.docker.createService(spec).catch((error: unknown) => {
      // A rerun after a crash finds it made already.
      if ((error as { statusCode?: number }).statusCode === 409) return;
      throw engineError(error, 'the swarm refused the service');
    });
  }

  /**
   * Follows a serving service's tasks until every replica of this deployment runs healthy and the swarm
   * calls the update completed (after its monitor window); fails as soon as the swarm starts rolling
   * back, or a first version's tasks keep failing, with the tasks' errors.
   */
  private async waitServing(
    desired: DesiredService,
    isUpdate: boolean,
    deadline: number,
    signal: AbortSignal,
    log: DeployLog,
  ): Promise<{ ok: true; ready: number } | { ok: false; reason: string }> {
    const name = servingName(desired.service.id);
    const replicas = desired.service.replica_count ?? 1;
    const seen = new Set<string>();
    let pause = FIRST_POLL_MS;
    let others = Number.POSITIVE_INFINITY;
    for (;;) {
      signal.throwIfAborted();
      const service = await this.inspect(name);
      if (!service) return { ok: false, reason: 'the swarm service was removed' };
      const all = await tasksOf(this.docker, name);
      const tasks = ofDeployment(all, desired.deploymentId);
      if (tasks.some((t) => t.Status.State === 'starting' || t.Status.State === 'running'))
        log.mark('container_started');
      for (const task of running(tasks)) {
        if (seen.has(task.ID)) continue;
        seen.add(task.ID);
        log.mark('first_healthy');
        // The swarm sends traffic to a replica once it runs healthy: so does the ingress, from now.
        this.ingress?.forget();
        log.line(
          'rollout',
          `Replica ${task.Slot ?? ''} (task ${task.ID.slice(0, 12)}) is running and healthy`,
        );
      }
      // The previous version's replicas stopping take their addresses with them.
      const previous = running(all).length - running(tasks).length;
      if (previous < others) this.ingress?.forget();
      if (previous === 0 && others > 0 && isUpdate) log.mark('old_stopped');
      others = previous;
      const failed = failedTasks(tasks);
      const state = service.UpdateStatus?.State;
      if (state === 'rollback_started' || state === 'rollback_completed' || state === 'paused') {
        return { ok: false, reason: taskErrors(tasks) || service.UpdateStatus?.Message || state };
      }
      if (!isUpdate && failed.length >= Math.max(3, 2 * replicas)) {
        return { ok: false, reason: `${failed.length} tasks failed: ${taskErrors(tasks)}` };
      }
      const ready = running(tasks).length;
      // An update is done when the swarm says so, after the last replica's monitor window.
      if (ready >= replicas && (state === undefined || state === 'completed')) return { ok: true, ready };
      if (Date.now() > deadline) {
        const why = taskErrors(tasks);
        return {
          ok: false,
          reason: `${ready} of ${replicas} replicas running and healthy within deploy_timeout (${desired.ops.deploy_timeout} min)${why ? `: ${why}` : ''}`,
        };
      }
      await sleep(pause, undefined, { signal }).catch(() => signal.throwIfAborted());
      pause = nextPause(pause);
    }
  }

  /** Waits for a job's one task to end (or the deadline: then the job is removed and the deployment fails). */
  private async waitJob(
    name: string,
    deadline: number,
    signal: AbortSignal,
    source: DeployedSource,
    log: DeployLog,
  ): Promise<void> {
    let pause = FIRST_POLL_MS;
    for (;;) {
      signal.throwIfAborted();
      const tasks = await tasksOf(this.docker, name);
      if (tasks.some((t) => t.Status.State === 'complete' || failedTasks([t]).length > 0)) return;
      if (Date.now() > deadline) {
        await this.removeService(name);
        throw rolloutFailed(log, 'the job did not finish within deploy_timeout', source);
      }
      await sleep(pause, undefined, { signal }).catch(() => signal.throwIfAborted());
      pause = nextPause(pause);
    }
  }

  /** A job deployment's outcome, from its task: exit code 0 is success, anything else is terminal. */
  private async jobOutcome(deploymentId: string, source: DeployedSource, log: DeployLog): Promise<void> {
    const tasks = await tasksOf(this.docker, jobName(deploymentId));
    const done = tasks.find((t) => t.Status.State === 'complete');
    if (done) {
      log.end('rollout', 'success', 'The job exited with code 0');
      return;
    }
    const failed = failedTasks(tasks)[0];
    if (!failed) throw new DeployFailed('the job service is gone', source);
    const code = failed.Status.ContainerStatus?.ExitCode;
    const reason = `the job exited with code ${code ?? 'unknown'}: ${failed.Status.Err ?? failed.Status.Message ?? ''}`;
    log.end('rollout', 'failed', reason);
    throw new DeployFailed(reason, source);
  }

  /**
   * The image a deployment runs, and the ops.json it follows. Every node pulls the image itself, so it
   * comes from a registry they all reach: a registry image is resolved to its digest by the manager; a
   * git build is made on the manager (the docker driver's code) and pushed to BERTH_SWARM_REGISTRY. The
   * service runs the digest (a tag can move).
   */
  private async resolveImage(desired: DesiredService, log: DeployLog): Promise<Resolved> {
    if (desired.service.source !== 'docker_image') return this.buildAndPush(desired, log);
    const image = imageOf(desired);
    log.line('pull', `Resolving ${image} in its registry`);
    const info = (await this.docker
      .getImage(image)
      .distribution()
      .catch((error: unknown) => {
        const failed = engineError(error, `could not resolve ${image} in its registry`);
        log.end('pull', 'failed', failed.message);
        throw failed;
      })) as { Descriptor?: { digest?: string } };
    const digest = info.Descriptor?.digest ?? '';
    log.end('pull', 'success', `Image ${image} is ${digest}; each node pulls it`);
    log.end('source', 'success', `Image ${image} is ${digest}`);
    return {
      image: digest ? `${image}@${digest}` : image,
      ops: desired.ops,
      source: { docker_image_digest: digest },
    };
  }

  private async buildAndPush(desired: DesiredService, log: DeployLog): Promise<Resolved> {
    const { registry, gitBaseUrl } = this.settings;
    if (!registry) {
      const message =
        'the swarm provider builds git services only with BERTH_SWARM_REGISTRY set: a registry every node can pull the built image from';
      log.end('source', 'failed', message);
      throw new TerminalError(message);
    }
    const tag = `${registry}/berth-${desired.service.id}:${desired.deploymentId}`;
    const built = await buildFromGit(this.docker, gitBaseUrl, desired, tag, log).catch((error: Error) => {
      log.end('source', 'failed', error.message);
      throw error;
    });
    await pushImage(this.docker, tag, (text) => log.line('build', text)).catch((error: Error) => {
      log.end('build', 'failed', error.message);
      throw error;
    });
    const digest = await digestOf(this.docker, tag);
    log.end('build', 'success', `Pushed ${tag} (${digest})`);
    return { ...built, image: `${tag}@${digest}`, source: { ...built.source, docker_image_digest: digest } };
  }

  /**
   * Removes the swarm services an older generation of the service left (the previous job or cron
   * template, or the serving service of a service whose type changed), never `keep` nor a newer one.
   */
  private async retireOlder(serviceId: string, generation: number, keep?: string): Promise<void> {
    for (const s of await this.servicesOf(serviceId)) {
      if (s.Spec?.Name === keep || s.Spec?.Labels?.[LABEL.role] === 'cron-run') continue;
      if (Number(s.Spec?.Labels?.[LABEL.generation] ?? 0) >= generation) continue;
      await this.removeService(s.ID);
    }
  }

  protected async removeWorkloads(service: ServiceRef): Promise<void> {
    // Cron templates before their runs: a tick after this finds no template and starts nothing.
    for (const s of await this.servicesOf(service.id, 'cron-template')) await this.removeService(s.ID);
    for (const s of await this.servicesOf(service.id)) await this.removeService(s.ID);
    await sweepSecrets(this.docker, service.id, Number.POSITIVE_INFINITY);
    await this.cron.rescan();
  }

  /** The ingress's targets: each running task of the serving service, at its node's published port. */
  protected async ingressTargets(route: RouteTarget): Promise<string[]> {
    // HAProxy's table waits for these: each is abandoned past its deadline (engine/deadlines.ts).
    const tasks = running(
      await tasksOf(this.docker, servingName(route.serviceId), engineDeadline(ENGINE_CALL_MS)),
    );
    if (tasks.length === 0) return [];
    const nodes = new Map(
      (await this.docker.listNodes(engineDeadline(ENGINE_CALL_MS))).map(
        (n: { ID: string; Status?: { Addr?: string } }) => [n.ID, n.Status?.Addr],
      ),
    );
    return tasks.flatMap((t) => {
      const published = t.Status.PortStatus?.Ports?.find((p) => p.TargetPort === route.port)?.PublishedPort;
      const address = t.NodeID ? nodes.get(t.NodeID) : undefined;
      return published && address ? [`${address}:${published}`] : [];
    });
  }

  protected async logSources(serviceId: string): Promise<LogSource[]> {
    const services = await this.servicesOf(serviceId);
    return services
      .filter((s) => s.Spec?.Labels?.[LABEL.role] !== 'cron-template')
      .map((s) => ({
        id: s.ID,
        replica: s.Spec?.Name ?? s.ID,
        logs: ({ follow, ...options }: LogOptions) =>
          this.docker.getService(s.ID).logs({ ...options, follow, details: false }),
      }));
  }
}

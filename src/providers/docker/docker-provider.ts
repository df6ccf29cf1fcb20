import { setTimeout as sleep } from 'node:timers/promises';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { isUuid } from '../../domain/uuid.ts';
import type { Db } from '../../store/database.ts';
import { EngineDriver } from '../engine/engine-driver.ts';
import { ensureNetwork } from '../engine/environment.ts';
import { buildFromGit } from '../engine/git-build.ts';
import { digestOf, engineError, imageOf, pullImage } from '../engine/images.ts';
import type { RouteTarget } from '../engine/ingress.ts';
import { LABEL, labelFilter, labelsOf, networkName, type Role } from '../engine/labels.ts';
import type { LogSource } from '../engine/logs.ts';
import { demultiplex } from '../engine/output.ts';
import type { Prepared, Resolved, Run, Strategies } from '../engine/rollout.ts';
import { NOT_DEPLOYED, rolloutFailed } from '../engine/rollout.ts';
import type { Schedules } from '../engine/schedules.ts';
import type { DockerSettings } from '../engine/settings.ts';
import { type DockerDb, dockerTables } from '../engine/tables.ts';
import type { DeployedSource, DeployLog, DesiredService, EnvironmentRef, ServiceRef } from '../provider.ts';
import { DeployFailed, REMOVED_GENERATION } from '../provider.ts';
import { dockerCron } from './cron.ts';
import { DockerDependencyBackups } from './dependency-backups.ts';
import { Drainer } from './drain.ts';
import { type Target, waitReady } from './health.ts';
import { ContainerMetrics } from './metrics.ts';
import { containerSources, containerTargets, requestReplica } from './replicas.ts';
import { DockerResources } from './resources.ts';
import { removeReplica, repairSandboxed, Sandboxes } from './sandboxes.ts';

/** Serving replicas come back after a crash or an Engine restart, until Berth stops them. */
const KEEP_RUNNING = { Name: 'unless-stopped' };

export interface DockerProviderOptions {
  db: Db;
  logger: Logger;
  settings: DockerSettings;
}

/**
 * Real containers on the Docker Engine, through its API (dockerode). One network per environment;
 * every container and built image labelled with its account, environment, service and deployment.
 * Web services are reached through the ingress (engine/ingress.ts); the rollout (engine/rollout.ts)
 * starts the new version, waits for it to be healthy, moves traffic (docker_routes, fenced by
 * generation) and succeeds; the old one drains afterwards (drain.ts).
 */
export class DockerProvider extends EngineDriver<Prepared, DockerSettings, DockerDb> {
  protected readonly driver = 'docker';
  protected readonly cron: Schedules;
  private readonly drainer: Drainer;
  private readonly sandboxes: Sandboxes;
  protected readonly opsCronRequest = requestReplica(this.docker, this.logger);
  readonly metrics: ContainerMetrics;
  readonly resources: DockerResources;
  readonly backups: DockerDependencyBackups;

  constructor(options: DockerProviderOptions) {
    super({
      settings: options.settings,
      logger: options.logger,
      docker: new Docker(),
      db: dockerTables(options.db),
    });
    this.metrics = new ContainerMetrics(this.docker, this.traffic);
    this.sandboxes = new Sandboxes(this.docker, options.settings, options.logger);
    this.resources = new DockerResources(this.docker, options.settings, (env) => this.ensureNetwork(env));
    this.backups = new DockerDependencyBackups(this.docker, options.settings.backupDir, this.resources);
    this.drainer = new Drainer({
      docker: this.docker,
      db: this.db,
      logger: options.logger,
      afterDrain: () => this.cron.rescan(),
    });
    // Only services this driver routes: another Berth sharing the engine keeps its own templates.
    this.cron = dockerCron(this.docker, this.db, options.logger, async (labelled) => {
      const ids = labelled.filter(isUuid);
      if (ids.length === 0) return new Set();
      const rows = await this.db
        .selectFrom('docker_routes')
        .select('service_id')
        .where('service_id', 'in', ids)
        .where('generation', '<', REMOVED_GENERATION)
        .execute();
      return new Set(rows.map((r) => r.service_id));
    });
  }

  protected override started(): Promise<void> {
    return this.drainer.drainAll();
  }

  // A graceful shutdown lets drains finish (a stop takes ten seconds at most); a crash leaves them to
  // the next start or deployment.
  protected override async stopped(): Promise<void> {
    await Promise.all([this.drainer.settle(15_000), this.sandboxes.settle()]);
  }

  protected ingressTargets(route: RouteTarget): Promise<string[]> {
    return containerTargets(this.docker)(route);
  }

  protected logSources(serviceId: string): Promise<LogSource[]> {
    return containerSources(this.docker)(serviceId);
  }

  protected async ensureNetwork(env: EnvironmentRef): Promise<string> {
    return ensureNetwork(this.docker, env, networkName(env.id), { Driver: 'bridge' });
  }

  private async containersOf(labels: Record<string, string>) {
    return this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', ...labels }),
    });
  }

  private async removeContainers(labels: Record<string, string>) {
    for (const c of await this.containersOf(labels)) await removeReplica(this.docker, c);
  }

  protected async cancelled(desired: DesiredService, log: DeployLog): Promise<void> {
    await this.removeContainers({ [LABEL.deployment]: desired.deploymentId });
    log.line('outcome', 'Cancelled: the containers this rollout started were removed');
  }

  /** What the docker driver gives the shared rollout (engine/rollout.ts): a strategy per service type. */
  protected readonly strategies: Strategies<Prepared> = {
    job: {
      start: (desired, run, signal, log) => this.runJob(desired, run, signal, log),
      retire: async (desired, after, signal) => {
        await this.retireOlder(desired.service.id, desired.generation, signal);
        await this.jobOutcome(desired.deploymentId, after.source);
      },
      observe: async (service) => {
        const [job] = await this.containersOf({ [LABEL.service]: service.id, [LABEL.role]: 'job' });
        if (!job) return NOT_DEPLOYED;
        const code = /Exited \((\d+)\)/.exec(job.Status)?.[1];
        const ended = code === '0' ? 'completed' : 'failed';
        return { run_status: job.State === 'exited' ? ended : 'running', ready_count: 0 };
      },
    },
    cron: {
      start: async (desired, run, _signal, log) => {
        const { service } = desired;
        const template = this.containerSpec(
          desired,
          run,
          'cron-template',
          `berth-${shortName(desired)}-cron`,
        );
        template.Labels = { ...template.Labels, [LABEL.cronSchedule]: service.cron_schedule ?? '' };
        await this.docker.createContainer(template).catch((error: unknown) => {
          throw engineError(error, 'the Docker Engine refused the container');
        });
        log.end('rollout', 'success', `Cron template created: runs on "${service.cron_schedule ?? ''}"`);
      },
      retire: (desired, _after, signal) => this.retireOlder(desired.service.id, desired.generation, signal),
      observe: async (service) => {
        const templates = await this.containersOf({
          [LABEL.service]: service.id,
          [LABEL.role]: 'cron-template',
        });
        return templates.length > 0 ? { run_status: 'scheduled', ready_count: 0 } : NOT_DEPLOYED;
      },
    },
    serving: {
      start: (desired, run, signal, log) => this.startReplicas(desired, run, signal, log),
      retire: async (desired, after, _signal, log) => {
        // The new version serves: the deployment has succeeded. The old one drains meanwhile, and
        // the next rollout's network sandboxes are made.
        this.drainer.drain(desired.service.id, { deploymentId: desired.deploymentId, log });
        this.sandboxes.replenish(desired, networkName(desired.environment.id));
        if (after.replaced)
          log.end('drain', 'success', 'The previous version drains: each old container gets 10 s to stop');
      },
      observe: async (service, route) => {
        const replicas = await this.containersOf({
          [LABEL.service]: service.id,
          [LABEL.role]: 'replica',
        });
        const serving = replicas.filter((c) => c.Labels[LABEL.deployment] === route?.deployment_id);
        // What lost its network sandbox comes back now; the next observation sees it running.
        await repairSandboxed(this.docker, serving, this.logger);
        const ready = serving.filter((c) => c.State === 'running').length;
        return {
          run_status: ready > 0 ? 'running' : serving.length > 0 ? 'stopped' : 'not_deployed',
          ready_count: ready,
        };
      },
    },
  };

  protected async standDown(desired: DesiredService): Promise<void> {
    await this.removeContainers({ [LABEL.deployment]: desired.deploymentId });
    await this.cron.rescan();
  }

  /** A rollout's image and network; a rerun of one never promoted starts afresh. */
  protected async prepare(desired: DesiredService, log: DeployLog): Promise<Prepared> {
    // What an earlier drain left when its process stopped.
    this.drainer.drain(desired.service.id);
    // Independent of each other: the image is resolved while the network and the leftovers are seen to.
    const [, network, image] = await Promise.all([
      this.removeContainers({ [LABEL.deployment]: desired.deploymentId }),
      this.ensureNetwork(desired.environment),
      this.prepareImage(desired, log),
    ]);
    return { ...image, network };
  }

  /** A container of the new version, in the role given. */
  private containerSpec(
    desired: DesiredService,
    run: Run<Prepared>,
    role: Role,
    name: string,
  ): Docker.ContainerCreateOptions {
    const { service } = desired;
    const variables = { ...desired.variables, ...(service.port ? { PORT: String(service.port) } : {}) };
    return {
      name,
      Image: run.image,
      Env: Object.entries(variables).map(([k, v]) => `${k}=${v}`),
      Cmd: service.run_command ? ['/bin/sh', '-c', service.run_command] : undefined,
      Labels: labelsOf(desired, role),
      HostConfig: {
        NetworkMode: run.network,
        NanoCpus: service.cpu_count_max ? Math.round(service.cpu_count_max * 1e9) : undefined,
        Memory: service.memory_mb_max ? service.memory_mb_max * 1024 * 1024 : undefined,
      },
      NetworkingConfig: {
        EndpointsConfig: { [run.network]: { Aliases: [service.subdomain, run.svcAlias] } },
      },
    };
  }

  /** A job's container, run to its end (or its deploy_timeout). */
  private async runJob(
    desired: DesiredService,
    run: Run<Prepared>,
    signal: AbortSignal,
    log: DeployLog,
  ): Promise<void> {
    const { ops, source, deadline } = run;
    const name = `berth-${shortName(desired)}-job`;
    const container = await this.run(this.containerSpec(desired, run, 'job', name), log);
    log.line('rollout', `Job container ${name} started`);
    // A lost lease ends the wait at once (the sleep rejects), before any further side effect.
    const exit = await Promise.race([
      container.wait() as Promise<{ StatusCode: number }>,
      sleep(Math.max(0, deadline - Date.now()), null, { signal, ref: false }),
    ]).catch((error: unknown) => {
      signal.throwIfAborted();
      throw error;
    });
    if (exit === null) {
      await container.remove({ force: true });
      throw rolloutFailed(
        log,
        `the job did not finish within deploy_timeout (${ops.deploy_timeout} min)`,
        source,
      );
    }
    log.line('rollout', await this.output(container, 50));
    log.end(
      'rollout',
      exit.StatusCode === 0 ? 'success' : 'failed',
      `The job exited with code ${exit.StatusCode}`,
    );
  }

  /** A web, internal or worker service's replicas, started side by side, until every one is ready. */
  private async startReplicas(
    desired: DesiredService,
    run: Run<Prepared>,
    signal: AbortSignal,
    log: DeployLog,
  ): Promise<void> {
    const { service, deploymentId } = desired;
    const { ops, source, deadline, network, route } = run;
    // The engine's time for one replica is the rollout's for all.
    const started = await Promise.allSettled(
      Array.from({ length: service.replica_count ?? 1 }, async (_, i): Promise<Target> => {
        const name = `berth-${shortName(desired)}-${i}`;
        const spec = this.containerSpec(desired, run, 'replica', name);
        const sandbox = await this.sandboxes.claim(service.id, `${name}-net`);
        if (sandbox) return this.runInSandbox(spec, sandbox, run, log);
        const container = await this.run(spec, log);
        const info = await container.inspect();
        log.line('rollout', `Replica ${name} created`);
        return { container, ip: info.NetworkSettings.Networks[network]?.IPAddress ?? '' };
      }),
    );
    const refused = started.find((r) => r.status === 'rejected');
    if (refused) {
      // The replicas that did start go with the deployment that failed.
      await this.removeContainers({ [LABEL.deployment]: deploymentId });
      throw refused.reason;
    }
    const targets = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    // Aborted (the lease was lost), the wait throws at once: the replicas are left as they are, since the
    // worker now running this deployment may be using them, and a rerun removes them anyway.
    const ready = await waitReady(
      this.docker,
      targets,
      ops.health_check,
      service.port,
      deadline,
      signal,
      (t) => {
        log.mark('first_healthy');
        log.line('rollout', `Replica ${t.container.id.slice(0, 12)} is healthy`);
      },
    );
    if (!ready.ok) {
      const shown = ready.exited ?? targets[0];
      const tail = shown ? await this.logTail(shown.container) : '';
      if (shown)
        log.line(
          'rollout',
          `Output of replica ${shown.container.id.slice(0, 12)}:\n${await this.output(shown.container, 50)}`,
        );
      await this.removeContainers({ [LABEL.deployment]: deploymentId });
      const kept = route ? ' The previous version keeps serving.' : '';
      throw rolloutFailed(
        log,
        `the new version did not become healthy: ${ready.reason}.${kept}`,
        source,
        tail,
      );
    }
    log.end('rollout', 'success', `${targets.length} of ${targets.length} replicas healthy`);
    signal.throwIfAborted();
    // Replicas get their restart policy only now: during the rollout an exit must fail it at once, with
    // its code, not turn into a crash loop that looks alive.
    for (const { container } of targets) await container.update({ RestartPolicy: KEEP_RUNNING });
  }

  /**
   * A replica started in a network sandbox made ahead, while the sandbox joins the environment's network
   * with the replica's aliases; a failure takes the sandbox with it.
   */
  private async runInSandbox(
    spec: Docker.ContainerCreateOptions,
    sandbox: string,
    run: Run<Prepared>,
    log: DeployLog,
  ): Promise<Target> {
    const aliases = spec.NetworkingConfig?.EndpointsConfig?.[run.network]?.Aliases ?? [];
    const joined: Docker.ContainerCreateOptions = {
      ...spec,
      HostConfig: { ...spec.HostConfig, NetworkMode: `container:${sandbox}` },
      NetworkingConfig: undefined,
    };
    const [container, ip] = await Promise.allSettled([
      this.run(joined, log),
      this.sandboxes.connect(sandbox, run.network, aliases),
    ]);
    if (container.status === 'fulfilled' && ip.status === 'fulfilled') {
      log.line('rollout', `Replica ${spec.name} created in its network sandbox`);
      return { container: container.value, ip: ip.value };
    }
    if (container.status === 'fulfilled')
      await container.value.remove({ force: true }).catch(() => undefined);
    await this.docker
      .getContainer(sandbox)
      .remove({ force: true })
      .catch(() => undefined);
    throw container.status === 'rejected'
      ? container.reason
      : engineError((ip as PromiseRejectedResult).reason, 'the Docker Engine could not connect the replica');
  }

  /** Creates and starts a container; one the Engine refuses (4xx: a memory limit below its minimum) is permanent. */
  private async run(spec: Docker.ContainerCreateOptions, log: DeployLog): Promise<Docker.Container> {
    const container = await this.docker.createContainer(spec).catch((error: unknown) => {
      throw engineError(error, 'the Docker Engine refused the container');
    });
    log.mark('container_created');
    try {
      await container.start();
      log.mark('container_started');
      return container;
    } catch (error) {
      await container.remove({ force: true }).catch(() => undefined);
      throw engineError(error, 'the Docker Engine could not start the container');
    }
  }

  /** A job deployment's outcome, from its container: exit code 0 is success, anything else is terminal. */
  private async jobOutcome(deploymentId: string, source: DeployedSource): Promise<void> {
    const [job] = await this.containersOf({ [LABEL.deployment]: deploymentId, [LABEL.role]: 'job' });
    if (!job) throw new DeployFailed('the job container is gone', source);
    const container = this.docker.getContainer(job.Id);
    const code = (await container.inspect()).State.ExitCode;
    if (code !== 0) {
      throw new DeployFailed(`the job exited with code ${code}.${await this.logTail(container)}`, source);
    }
  }

  /**
   * Stops and removes every container of the service from an older generation than the given one: the
   * previous version, and whatever an earlier type left (replicas of a service that became a cron, a
   * template of one that became a web service). Never a newer generation's. Cron schedules follow.
   */
  private async retireOlder(serviceId: string, generation: number, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    for (const c of await this.containersOf({ [LABEL.service]: serviceId })) {
      if (Number(c.Labels[LABEL.generation] ?? 0) >= generation) continue;
      // Ten seconds to finish what they are doing, as `docker stop` gives.
      await this.docker
        .getContainer(c.Id)
        .stop({ t: 10 })
        .catch(() => undefined);
      await removeReplica(this.docker, c);
    }
    await this.cron.rescan();
  }

  /** The image a deployment runs, and the ops.json it follows (a repository's file wins over none). */
  private async prepareImage(desired: DesiredService, log: DeployLog): Promise<Resolved> {
    const step = desired.service.source === 'docker_image' ? 'pull' : 'source';
    try {
      return await this.resolveImage(desired, log);
    } catch (error) {
      log.end(step, 'failed', (error as Error).message);
      throw error;
    }
  }

  private async resolveImage(desired: DesiredService, log: DeployLog): Promise<Resolved> {
    const { service, deploymentId } = desired;
    if (service.source === 'docker_image') {
      const image = imageOf(desired);
      const local = await this.docker
        .getImage(image)
        .inspect()
        .catch(() => null);
      const current = local && service.docker_registry ? await this.unchanged(image, local) : null;
      if (local && !service.docker_registry) log.line('pull', `Using the local image ${image}`);
      else if (current) log.line('pull', `${image} is up to date (${current}): no pull`);
      else {
        log.line('pull', `Pulling ${image}`);
        await pullImage(this.docker, image, this.settings.pullTimeoutMs, (text) => log.line('pull', text));
      }
      const digest = await digestOf(this.docker, image);
      log.end('pull', 'success');
      log.end('source', 'success', `Image ${image} is ${digest}`);
      return { image, ops: desired.ops, source: { docker_image_digest: digest } };
    }
    return buildFromGit(
      this.docker,
      this.settings.gitBaseUrl,
      desired,
      `berth-${service.id}:${deploymentId}`,
      log,
    );
  }

  /**
   * The digest of a registry image already here, when its registry still has that digest under the tag
   * (one manifest request, instead of a pull): null when the tag moved or the registry cannot say.
   */
  private async unchanged(image: string, local: Docker.ImageInspectInfo): Promise<string | null> {
    const repository = image.slice(0, image.lastIndexOf(':'));
    const here = local.RepoDigests?.find((d) => d.startsWith(`${repository}@`))?.split('@')[1];
    if (!here) return null;
    const remote = (await this.docker
      .getImage(image)
      .distribution()
      .catch(() => null)) as { Descriptor?: { digest?: string } } | null;
    return remote?.Descriptor?.digest === here ? here : null;
  }

  /** The last `lines` lines a container printed, stdout and stderr together. */
  private async output(container: Docker.Container, lines: number): Promise<string> {
    try {
      const buffer = await container.logs({ stdout: true, stderr: true, tail: lines, follow: false });
      return demultiplex(buffer).trim() || '(no output)';
    } catch {
      return '(its output could not be read)';
    }
  }

  private async logTail(container: Docker.Container): Promise<string> {
    try {
      const buffer = await container.logs({ stdout: true, stderr: true, tail: 5, follow: false });
      const text = demultiplex(buffer).trim();
      return text ? ` Last output: ${text.slice(-500)}` : '';
    } catch {
      return '';
    }
  }

  protected async removeWorkloads(service: ServiceRef): Promise<void> {
    // The cron templates first: a tick that starts a run after this finds its template gone and
    // removes the run itself, and every run created before it is in the listing below. A spare network
    // sandbox being made is made before the listing.
    await this.sandboxes.settle(service.id);
    await this.removeContainers({ [LABEL.service]: service.id, [LABEL.role]: 'cron-template' });
    await this.removeContainers({ [LABEL.service]: service.id });
    await this.cron.rescan();
    const images = await this.docker.listImages({ filters: labelFilter({ [LABEL.service]: service.id }) });
    for (const image of images) {
      await this.docker.getImage(image.Id).remove({ force: true }).catch(ignoreGone);
    }
  }
}

/** The start of a deployment's container names: the service's subdomain and the deployment's id. */
function shortName({ service, deploymentId }: DesiredService): string {
  return `${service.subdomain}-${deploymentId.slice(0, 8)}`;
}

/** Removing what is already gone is done. */
function ignoreGone(error: { statusCode?: number }): void {
  if (error.statusCode !== 404) throw error;
}

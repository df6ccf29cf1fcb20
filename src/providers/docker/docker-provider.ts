import { readFile } from 'node:fs/promises';
import os from 'node:os';
import Docker from 'dockerode';
import type { Logger } from 'pino';
import { type OpsConfig, parseOpsJson } from '../../domain/ops-json.ts';
import { isUuid } from '../../domain/uuid.ts';
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
import { ProviderError } from '../provider.ts';
import { CronScheduler } from './cron.ts';
import { Drainer } from './drain.ts';
import { checkout, inside } from './git-source.ts';
import { type Target, waitReady } from './health.ts';
import { buildImage, engineError, imageReference, pullImage } from './images.ts';
import { type Ingress, startIngress } from './ingress.ts';
import { LABEL, labelFilter, networkName, type Role } from './labels.ts';

/** Serving replicas come back after a crash or an Engine restart, until Berth stops them. */
const KEEP_RUNNING = { Name: 'unless-stopped' };

export interface DockerProviderOptions {
  db: Db;
  logger: Logger;
  /** Host name services live under: `{subdomain}.{ingressHost}`. */
  ingressHost: string;
  ingressPort: number;
  /** Where the public reaches the ingress (BERTH_PUBLIC_URL): origins use its scheme and port. */
  publicUrl: string;
  /** Address the ingress listens on. */
  listenHost: string;
  gitBaseUrl: string;
  pullTimeoutMs: number;
}

/**
 * Real containers on the Docker Engine, through its API (dockerode). One network per environment;
 * every container and built image labelled with its account, environment, service and deployment.
 * Web services are reached through the ingress (ingress.ts); the rollout starts the new version, waits
 * for it to be healthy, moves traffic (docker_routes) and succeeds; the old one drains afterwards
 * (drain.ts).
 */
export class DockerProvider implements Provider {
  readonly name = 'docker';
  private readonly docker = new Docker();
  private readonly options: DockerProviderOptions;
  private readonly cron: CronScheduler;
  private ingress: Ingress | undefined;
  private readonly drainer: Drainer;

  constructor(options: DockerProviderOptions) {
    this.options = options;
    this.drainer = new Drainer({
      docker: this.docker,
      db: options.db,
      logger: options.logger,
      afterDrain: () => this.cron.rescan(),
    });
    this.cron = new CronScheduler(this.docker, options.logger, async (labelled) => {
      const ids = labelled.filter(isUuid);
      if (ids.length === 0) return new Set();
      const rows = await options.db
        .selectFrom('services')
        .select('id')
        .where('id', 'in', ids)
        .where('is_deleted', '=', false)
        .execute();
      return new Set(rows.map((r) => r.id));
    });
  }

  refuseDeploy(): string | null {
    return null;
  }

  async startServing(): Promise<void> {
    this.ingress = await startIngress({
      db: this.options.db,
      docker: this.docker,
      logger: this.options.logger,
      host: this.options.listenHost,
      port: this.options.ingressPort,
      ingressHost: this.options.ingressHost,
    });
    await this.cron.start();
    await this.drainer.drainAll();
  }

  async close(): Promise<void> {
    this.cron.stop();
    await this.ingress?.close();
    // A graceful shutdown lets drains finish (a stop takes ten seconds at most); a crash leaves them to
    // the next start or deployment.
    await this.drainer.settle(15_000);
  }

  private async ensureNetwork(env: EnvironmentRef): Promise<string> {
    const name = networkName(env.id);
    const existing = await this.docker.listNetworks({ filters: { name: [name] } });
    if (!existing.some((n) => n.Name === name)) {
      try {
        await this.docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          Labels: { [LABEL.managed]: 'true', [LABEL.account]: env.account_id, [LABEL.environment]: env.id },
        });
      } catch (error) {
        // Another worker created it between our look and our create.
        if ((error as { statusCode?: number }).statusCode !== 409) throw error;
      }
    }
    return name;
  }

  async provisionEnvironment(env: EnvironmentRef): Promise<void> {
    await this.ensureNetwork(env);
  }

  async environmentIdentity(): Promise<EnvironmentIdentity> {
    const addresses = Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4' && !a.internal)
      .map((a) => (a as os.NetworkInterfaceInfo).address);
    return {
      ingress_host: this.options.ingressHost,
      ingress_url: this.options.publicUrl,
      public_nat_ips: addresses,
      svc_role_arn: '',
    };
  }

  domainValidationZone(): string {
    return 'acm-validations.berth.local';
  }

  // The ingress reads active custom domains from the database: attaching and detaching is bookkeeping.
  async attachDomain(_service: ServiceRow, domain: { id: string }) {
    return { provCustomDomainId: `docker-cd-${domain.id.slice(0, 8)}` };
  }

  async detachDomain(): Promise<void> {}

  // Containers read their variables when they start: the next deployment carries new secrets.
  async writeSecrets(): Promise<void> {}

  private async containersOf(labels: Record<string, string>) {
    return this.docker.listContainers({
      all: true,
      filters: labelFilter({ [LABEL.managed]: 'true', ...labels }),
    });
  }

  private async removeContainers(labels: Record<string, string>) {
    for (const c of await this.containersOf(labels)) {
      await this.docker.getContainer(c.Id).remove({ force: true }).catch(ignoreGone);
    }
  }

  /** The deployment whose containers serve the service (the routing table), if any. */
  private async servingDeployment(serviceId: string): Promise<string | undefined> {
    const route = await this.options.db
      .selectFrom('docker_routes')
      .select('deployment_id')
      .where('service_id', '=', serviceId)
      .executeTakeFirst();
    return route?.deployment_id;
  }

  async deploy(request: DeployRequest): Promise<DeployResult> {
    const { service, deploymentId, environment } = request;
    const provDeploymentId = `docker-${deploymentId.slice(0, 8)}`;
    const namespaceName = `env-${environment.id.slice(0, 8)}`;
    const svcAlias = `${service.subdomain}.${namespaceName}.svc.cluster.local`;
    let source: DeployedSource | undefined;
    const fail = (reason: string): DeployResult => ({ ok: false, provDeploymentId, reason, source });
    if (service.source === 'helm_chart') {
      return fail(
        'the docker provider cannot run Helm charts: use the kubernetes provider for helm_chart services',
      );
    }
    const success = (): DeployResult => ({ ok: true, provDeploymentId, namespaceName, svcAlias, source });
    const serving = await this.servingDeployment(service.id);
    // A rerun (after a crash) of a deployment already promoted: it is what serves; report it as it went.
    if (serving === deploymentId) {
      if (service.type === 'job' || service.type === 'cron')
        await this.retireAllBut(service.id, deploymentId);
      else this.drainer.drain(service.id);
      return service.type === 'job' ? this.jobOutcome(deploymentId, success(), fail) : success();
    }
    // A rerun of one never promoted starts afresh.
    await this.removeContainers({ [LABEL.deployment]: deploymentId });
    // What an earlier drain left when its process stopped.
    this.drainer.drain(service.id);
    const network = await this.ensureNetwork(environment);

    let image: string;
    let ops = request.ops;
    try {
      ({ image, ops, source } = await this.prepareImage(request));
    } catch (error) {
      if (error instanceof ProviderError && !error.retryable) return fail(error.message);
      throw error;
    }

    const labels = (role: Role): Record<string, string> => ({
      [LABEL.managed]: 'true',
      [LABEL.account]: service.account_id,
      [LABEL.environment]: environment.id,
      [LABEL.service]: service.id,
      [LABEL.deployment]: deploymentId,
      [LABEL.role]: role,
    });
    const exportsAsVariables = Object.fromEntries(ops.dependencies.flatMap((d) => Object.entries(d.exports)));
    const variables = {
      ...exportsAsVariables,
      ...request.variables,
      ...(service.port ? { PORT: String(service.port) } : {}),
    };
    const spec = (role: Role, name: string): Docker.ContainerCreateOptions => ({
      name,
      Image: image,
      Env: Object.entries(variables).map(([k, v]) => `${k}=${v}`),
      Cmd: service.run_command ? ['/bin/sh', '-c', service.run_command] : undefined,
      Labels: labels(role),
      HostConfig: {
        NetworkMode: network,
        NanoCpus: service.cpu_count_max ? Math.round(service.cpu_count_max * 1e9) : undefined,
        Memory: service.memory_mb_max ? service.memory_mb_max * 1024 * 1024 : undefined,
      },
      NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [service.subdomain, svcAlias] } } },
    });
    const deadline = Date.now() + ops.deploy_timeout * 60_000;
    const short = `${service.subdomain}-${deploymentId.slice(0, 8)}`;

    if (service.type === 'job') {
      const container = await this.run(spec('job', `berth-${short}-job`));
      const exit = await Promise.race([
        container.wait() as Promise<{ StatusCode: number }>,
        new Promise<null>((resolve) =>
          setTimeout(() => resolve(null), Math.max(0, deadline - Date.now())).unref(),
        ),
      ]);
      if (exit === null) {
        await container.remove({ force: true });
        return fail(`the job did not finish within deploy_timeout (${ops.deploy_timeout} min)`);
      }
      await this.promote(service.id, deploymentId, null, ops);
      await this.retireAllBut(service.id, deploymentId);
      return this.jobOutcome(deploymentId, success(), fail);
    }

    if (service.type === 'cron') {
      const template = spec('cron-template', `berth-${short}-cron`);
      template.Labels = { ...template.Labels, [LABEL.cronSchedule]: service.cron_schedule ?? '' };
      await this.docker.createContainer(template).catch((error: unknown) => {
        throw engineError(error, 'the Docker Engine refused the container');
      });
      await this.promote(service.id, deploymentId, null, ops);
      await this.retireAllBut(service.id, deploymentId);
      return success();
    }

    const targets: Target[] = [];
    for (let i = 0; i < (service.replica_count ?? 1); i++) {
      const container = await this.run(spec('replica', `berth-${short}-${i}`)).catch(async (error) => {
        // The replicas already started go with the deployment that failed.
        await this.removeContainers({ [LABEL.deployment]: deploymentId });
        throw error;
      });
      const info = await container.inspect();
      targets.push({ container, ip: info.NetworkSettings.Networks[network]?.IPAddress ?? '' });
    }
    const ready = await waitReady(targets, ops.health_check, service.port, deadline);
    if (!ready.ok) {
      const shown = ready.exited ?? targets[0];
      const tail = shown ? await this.logTail(shown.container) : '';
      await this.removeContainers({ [LABEL.deployment]: deploymentId });
      const kept = serving ? ' The previous version keeps serving.' : '';
      return fail(`the new version did not become healthy: ${ready.reason}.${kept}${tail}`);
    }
    // A worker that lost the job must not move traffic: the one that took it over decides.
    request.signal?.throwIfAborted();
    // Replicas get their restart policy only now: during the rollout an exit must fail it at once, with
    // its code, not turn into a crash loop that looks alive.
    for (const { container } of targets) await container.update({ RestartPolicy: KEEP_RUNNING });
    await this.promote(service.id, deploymentId, service.port, ops);
    // The new version serves: the deployment has succeeded. The old one drains meanwhile.
    this.drainer.drain(service.id);
    return success();
  }

  /** Creates and starts a container; one the Engine refuses (4xx: a memory limit below its minimum) is permanent. */
  private async run(spec: Docker.ContainerCreateOptions): Promise<Docker.Container> {
    const container = await this.docker.createContainer(spec).catch((error: unknown) => {
      throw engineError(error, 'the Docker Engine refused the container');
    });
    try {
      await container.start();
      return container;
    } catch (error) {
      await container.remove({ force: true }).catch(() => undefined);
      throw engineError(error, 'the Docker Engine could not start the container');
    }
  }

  /** A job deployment's outcome, from its container: exit code 0 is success. */
  private async jobOutcome(
    deploymentId: string,
    success: DeployResult,
    fail: (reason: string) => DeployResult,
  ): Promise<DeployResult> {
    const [job] = await this.containersOf({ [LABEL.deployment]: deploymentId, [LABEL.role]: 'job' });
    if (!job) return fail('the job container is gone');
    const container = this.docker.getContainer(job.Id);
    const code = (await container.inspect()).State.ExitCode;
    return code === 0 ? success : fail(`the job exited with code ${code}.${await this.logTail(container)}`);
  }

  /**
   * Stops and removes every container of the service that is not the given deployment's: the previous
   * version, and whatever an earlier type left (replicas of a service that became a cron, a template of
   * one that became a web service). Cron schedules follow.
   */
  private async retireAllBut(serviceId: string, deploymentId: string): Promise<void> {
    for (const c of await this.containersOf({ [LABEL.service]: serviceId })) {
      if (c.Labels[LABEL.deployment] === deploymentId) continue;
      const container = this.docker.getContainer(c.Id);
      // Ten seconds to finish what they are doing, as `docker stop` gives.
      await container.stop({ t: 10 }).catch(() => undefined);
      await container.remove({ force: true }).catch(ignoreGone);
    }
    await this.cron.rescan();
  }

  /** The image a deployment runs, and the ops.json it follows (a repository's file wins over none). */
  private async prepareImage(
    request: DeployRequest,
  ): Promise<{ image: string; ops: OpsConfig; source: DeployedSource }> {
    const { service, target, deploymentId } = request;
    if (service.source === 'docker_image') {
      const image = imageReference(
        service.docker_registry,
        service.docker_image ?? '',
        target.docker_image_tag,
      );
      const local = service.docker_registry
        ? null
        : await this.docker
            .getImage(image)
            .inspect()
            .catch(() => null);
      if (!local) await pullImage(this.docker, image, this.options.pullTimeoutMs);
      return { image, ops: request.ops, source: { docker_image_digest: await this.digestOf(image) } };
    }
    const source = await checkout(
      this.options.gitBaseUrl,
      service.git_repo_full_name ?? '',
      service.git_repo_branch ?? 'main',
      target.commit_id,
    );
    try {
      let ops = request.ops;
      if (service.ops_json_path) {
        const text = await readFile(inside(source.dir, service.ops_json_path, 'ops_json_path'), 'utf8').catch(
          () => null,
        );
        if (text === null)
          throw new ProviderError(`no ops.json at ${service.ops_json_path}`, { retryable: false });
        const parsed = parseOpsJson(text, service.ops_json_path);
        if (parsed.errors.length > 0) {
          throw new ProviderError(parsed.errors.map((e) => e.error).join('; '), { retryable: false });
        }
        ops = parsed.config;
      }
      const image = `berth-${service.id}:${deploymentId}`;
      await buildImage(this.docker, {
        repoDir: source.dir,
        buildContext: service.build_context,
        dockerfilePath: service.dockerfile_path,
        tag: image,
        labels: { [LABEL.managed]: 'true', [LABEL.service]: service.id, [LABEL.deployment]: deploymentId },
      });
      return {
        image,
        ops,
        source: {
          git_commit_ref: source.commit,
          git_commit_author: source.author,
          git_commit_message: source.message,
          docker_image_digest: await this.digestOf(image),
        },
      };
    } finally {
      source.remove();
    }
  }

  /** An image's registry digest when it came from a registry (a tag can move; this cannot), else its id. */
  private async digestOf(image: string): Promise<string> {
    const info = await this.docker.getImage(image).inspect();
    const pulled = info.RepoDigests?.find((d) => image.startsWith(`${d.split('@')[0]}:`));
    return pulled?.split('@')[1] ?? info.Id;
  }

  /** Moves traffic to a deployment: from here on the ingress sends the service's requests to it. */
  private async promote(
    serviceId: string,
    deploymentId: string,
    port: number | null,
    ops: OpsConfig,
  ): Promise<void> {
    const row = { deployment_id: deploymentId, port, ops: JSON.stringify(ops), updated_at: new Date() };
    await this.options.db
      .insertInto('docker_routes')
      .values({ service_id: serviceId, ...row })
      .onConflict((oc) => oc.column('service_id').doUpdateSet(row))
      .execute();
  }

  private async logTail(container: Docker.Container): Promise<string> {
    try {
      const buffer = (await container.logs({ stdout: true, stderr: true, tail: 5 })) as unknown as Buffer;
      const text = demultiplex(buffer).trim();
      return text ? ` Last output: ${text.slice(-500)}` : '';
    } catch {
      return '';
    }
  }

  async status(service: ServiceRow): Promise<RuntimeStatus> {
    const all = await this.containersOf({ [LABEL.service]: service.id });
    if (all.length === 0)
      return { run_status: service.is_deleted ? 'deleted' : 'not_deployed', ready_count: 0 };
    if (service.type === 'cron') {
      return {
        run_status: all.some((c) => c.Labels[LABEL.role] === 'cron-template') ? 'scheduled' : 'not_deployed',
        ready_count: 0,
      };
    }
    if (service.type === 'job') {
      const job = all.find((c) => c.Labels[LABEL.role] === 'job');
      const exited = job?.State === 'exited';
      const code = job ? /Exited \((\d+)\)/.exec(job.Status)?.[1] : undefined;
      return {
        run_status: !job ? 'not_deployed' : exited ? (code === '0' ? 'completed' : 'failed') : 'running',
        ready_count: 0,
      };
    }
    const servingId = await this.servingDeployment(service.id);
    const serving = all.filter(
      (c) => c.Labels[LABEL.role] === 'replica' && c.Labels[LABEL.deployment] === servingId,
    );
    const ready = serving.filter((c) => c.State === 'running').length;
    return {
      run_status: ready > 0 ? 'running' : serving.length > 0 ? 'stopped' : 'not_deployed',
      ready_count: ready,
    };
  }

  async deleteService(service: ServiceRow): Promise<void> {
    // Cron templates first: a tick that starts a run afterwards sees its template gone (cron.ts), and
    // one that started before is in the listing of the second pass.
    await this.removeContainers({ [LABEL.service]: service.id, [LABEL.role]: 'cron-template' });
    await this.removeContainers({ [LABEL.service]: service.id });
    await this.cron.rescan();
    const images = await this.docker.listImages({ filters: labelFilter({ [LABEL.service]: service.id }) });
    for (const image of images) {
      await this.docker.getImage(image.Id).remove({ force: true }).catch(ignoreGone);
    }
    await this.options.db.deleteFrom('docker_routes').where('service_id', '=', service.id).execute();
  }
}

/** Docker frames a non-TTY container's output: 8 bytes (stream, 0, 0, 0, size) before each chunk. */
function demultiplex(buffer: Buffer): string {
  const chunks: Buffer[] = [];
  for (let at = 0; at + 8 <= buffer.length; ) {
    const size = buffer.readUInt32BE(at + 4);
    chunks.push(buffer.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Removing what is already gone is done. */
function ignoreGone(error: { statusCode?: number }): void {
  if (error.statusCode !== 404) throw error;
}

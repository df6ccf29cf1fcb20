import { randomUUID } from 'node:crypto';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { LABEL, labelFilter } from '../engine/labels.ts';
import type { DockerSettings } from '../engine/settings.ts';
import type { DesiredService } from '../provider.ts';
import { ensurePauseImage, PAUSE_COMMAND } from './pause-image.ts';
import { sandboxOf } from './replica-address.ts';

/**
 * Network sandboxes made ahead (the Kubernetes "pause container" model): a replica's network namespace,
 * held by a small container of Berth's pause image (docker/pause-image.ts) or BERTH_DOCKER_SANDBOX_IMAGE, so a new version's container joins it
 * (`NetworkMode: container:<sandbox>`) instead of having one made. The Engine's `docker start` of a
 * container on a user-defined bridge spends most of its time making the namespace and the network in
 * it (docs/performance.md, "Push to live (docker)"); joining one takes a third of that.
 *
 * A spare waits per replica slot, made after each rollout and taken off the environment's network, so
 * nothing resolves to it. A rollout claims one by renaming it from its spare name (another rollout no
 * longer finds it under that name), starts the replica in it and meanwhile connects it to the network
 * with the replica's aliases (one `network connect`, tens of milliseconds). A claimed sandbox lives
 * and goes with its replica: whatever removes the replica removes it (`removeReplica`), so the aliases
 * stop resolving when the version they named stops, as a replica's own endpoint would.
 */

/** Where spares are in their names: `berth-spare-<service id>-<random>`. */
const SPARE_PREFIX = 'berth-spare-';

/** What a sandbox runs: the operator's image with its own command, or Berth's pause image. */
interface SandboxImage {
  image: string;
  cmd?: string[];
}

export class Sandboxes {
  private readonly docker: Docker;
  private readonly settings: Pick<DockerSettings, 'sandboxes' | 'sandboxImage'>;
  private readonly logger: Logger;
  /** The replenishment running per service: one at a time, so it never makes more than wanted. */
  private readonly replenishing = new Map<string, Promise<void>>();
  /** The image, found (or imported) once; null while sandboxes are off. */
  private resolved: Promise<SandboxImage | null> | undefined;

  constructor(docker: Docker, settings: Pick<DockerSettings, 'sandboxes' | 'sandboxImage'>, logger: Logger) {
    this.docker = docker;
    this.settings = settings;
    this.logger = logger;
  }

  /** The sandboxes' image; null when they are off, or Berth has no pause program for the Engine. */
  private image(): Promise<SandboxImage | null> {
    this.resolved ??= this.resolveImage().catch((err) => {
      // Tried again at the next rollout; meanwhile replicas get their network made as they start.
      this.resolved = undefined;
      this.logger.warn({ err }, 'making the network sandbox image failed: replicas start without sandboxes');
      return null;
    });
    return this.resolved;
  }

  private async resolveImage(): Promise<SandboxImage | null> {
    const { sandboxes, sandboxImage } = this.settings;
    if (!sandboxes) return null;
    if (sandboxImage) return { image: sandboxImage };
    const { Architecture } = await this.docker.info();
    const image = await ensurePauseImage(this.docker, Architecture);
    if (!image) {
      this.logger.warn(
        { architecture: Architecture },
        'no network sandbox image for this Engine architecture: replicas start without sandboxes (set BERTH_DOCKER_SANDBOX_IMAGE to a pause image to have them)',
      );
      return null;
    }
    return { image, cmd: PAUSE_COMMAND };
  }

  /**
   * This process's claims go one at a time: two that listed the same spare could both rename it before
   * the Engine releases its spare name; one after the other, the second no longer lists it.
   */
  private claiming: Promise<unknown> = Promise.resolve();

  /** A spare of the service, renamed to `name` for one replica; null when none is ready. */
  claim(serviceId: string, name: string): Promise<string | null> {
    const claimed = this.claiming.then(async () =>
      (await this.image()) ? this.claimNow(serviceId, name) : null,
    );
    this.claiming = claimed.catch(() => undefined);
    return claimed;
  }

  private async claimNow(serviceId: string, name: string): Promise<string | null> {
    const spares = await this.docker.listContainers({
      filters: {
        ...labelFilter({ [LABEL.service]: serviceId, [LABEL.role]: 'sandbox' }),
        name: [SPARE_PREFIX],
      },
    });
    for (const spare of spares) {
      // A spare still on the network is still being made.
      const ready = Object.keys(spare.NetworkSettings?.Networks ?? {}).length === 0;
      const spareName = spare.Names.find((n) => n.startsWith(`/${SPARE_PREFIX}`))?.slice(1);
      if (!ready || !spareName) continue;
      try {
        // By its spare name: one another process renamed first is not found under it.
        await this.docker.getContainer(spareName).rename({ name });
        return spare.Id;
      } catch {
        // Another rollout claimed it first (or it went): the next one.
      }
    }
    return null;
  }

  /** Puts a claimed sandbox on the environment's network with the replica's aliases; its address there. */
  async connect(id: string, network: string, aliases: string[]): Promise<string> {
    await this.docker.getNetwork(network).connect({ Container: id, EndpointConfig: { Aliases: aliases } });
    const info = await this.docker.getContainer(id).inspect();
    return info.NetworkSettings.Networks[network]?.IPAddress ?? '';
  }

  /** Makes spares in the background until the service has one per replica. */
  replenish(desired: DesiredService, network: string): void {
    if (!this.settings.sandboxes) return;
    const serviceId = desired.service.id;
    const previous = this.replenishing.get(serviceId) ?? Promise.resolve();
    const next = previous
      .then(() => this.replenishNow(desired, network))
      .catch((err) => this.logger.warn({ err, service: serviceId }, 'making spare network sandboxes failed'))
      .finally(() => {
        if (this.replenishing.get(serviceId) === next) this.replenishing.delete(serviceId);
      });
    this.replenishing.set(serviceId, next);
  }

  /** Waits for the replenishments in progress: the service's, or all. */
  async settle(serviceId?: string): Promise<void> {
    await Promise.all(serviceId ? [this.replenishing.get(serviceId)] : this.replenishing.values());
  }

  private async replenishNow(desired: DesiredService, network: string): Promise<void> {
    const { service, environment } = desired;
    const image = await this.image();
    if (!image) return;
    const spares = await this.docker.listContainers({
      all: true,
      filters: {
        ...labelFilter({ [LABEL.service]: service.id, [LABEL.role]: 'sandbox' }),
        name: [SPARE_PREFIX],
      },
    });
    // One a process stopped while making it is still on the network: finished now.
    for (const spare of spares) {
      for (const name of Object.keys(spare.NetworkSettings?.Networks ?? {})) {
        await this.docker
          .getNetwork(name)
          .disconnect({ Container: spare.Id })
          .catch(() => undefined);
      }
    }
    const wanted = (service.replica_count ?? 1) - spares.length;
    for (let i = 0; i < wanted; i++) {
      const container = await this.docker.createContainer({
        name: `${SPARE_PREFIX}${service.id}-${randomUUID().slice(0, 8)}`,
        Image: image.image,
        Cmd: image.cmd,
        Labels: {
          [LABEL.managed]: 'true',
          [LABEL.account]: service.account_id,
          [LABEL.environment]: environment.id,
          [LABEL.service]: service.id,
          [LABEL.role]: 'sandbox',
        },
        // Made on the network, so the namespace gets the environment's name resolution, then taken off
        // it until a rollout claims it: no alias may resolve to a namespace where nothing listens.
        HostConfig: { NetworkMode: network, RestartPolicy: { Name: 'unless-stopped' } },
      });
      await container.start();
      await this.docker.getNetwork(network).disconnect({ Container: container.id });
    }
  }
}

/**
 * Brings back serving replicas whose network sandbox stopped or started anew. A replica lives in its
 * sandbox's namespace: the sandbox stopped (`docker kill`, or an Engine restart that started it after
 * the replica, which the Engine then refused to start), the replica has no network; the sandbox
 * restarted (its restart policy), the replica holds the old namespace. So: the sandbox is started (it
 * rejoins the environment's network with its aliases), then the replica started, or restarted into the
 * sandbox's new namespace. The observer calls this with each service's serving replicas.
 */
export async function repairSandboxed(docker: Docker, replicas: Docker.ContainerInfo[], logger: Logger) {
  for (const replica of replicas) {
    const sandboxId = sandboxOf(replica);
    if (!sandboxId) continue;
    try {
      const sandbox = docker.getContainer(sandboxId);
      let sandboxState = (await sandbox.inspect()).State;
      const sandboxWasDown = !sandboxState.Running;
      if (sandboxWasDown) {
        await sandbox.start();
        sandboxState = (await sandbox.inspect()).State;
      }
      const container = docker.getContainer(replica.Id);
      const state = (await container.inspect()).State;
      if (state.Running) {
        if (new Date(state.StartedAt) >= new Date(sandboxState.StartedAt)) continue;
        await container.restart({ t: 1 });
      } else if (!state.Restarting && (sandboxWasDown || state.Error)) {
        // Down for its sandbox (a replica stopped otherwise stays as it is: observe reports it stopped).
        await container.start();
      } else continue;
      logger.warn(
        { replica: replica.Id, sandbox: sandboxId },
        'a replica lost its network sandbox: both started again',
      );
    } catch (err) {
      logger.warn({ err, replica: replica.Id }, 'bringing back a replica and its network sandbox failed');
    }
  }
}

/** Removes a container and, when it ran in a sandbox, the sandbox with it; what is gone already is done. */
export async function removeReplica(docker: Docker, c: Docker.ContainerInfo): Promise<void> {
  await docker.getContainer(c.Id).remove({ force: true }).catch(ignoreGone);
  const sandbox = sandboxOf(c);
  if (sandbox) await docker.getContainer(sandbox).remove({ force: true }).catch(ignoreGone);
}

function ignoreGone(error: { statusCode?: number }): void {
  if (error.statusCode !== 404) throw error;
}

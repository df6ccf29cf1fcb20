/**
 * ops.json dependencies as containers of their own on the environment's network: each from its
 * engine's configured image (engine/dependency-engines.ts) with a named volume for its data. The container's
 * name and its volume's derive from the resource (domain/resource-names.ts), so `ensure` finds what an
 * earlier run made instead of making it twice, and reads the password back from it.
 * @module
 */
import type Docker from 'dockerode';
import { instanceMemoryBytes } from '../../domain/instance-memory.ts';
import type { OpsResource } from '../../domain/ops-json.ts';
import { TerminalError } from '../../jobs/errors.ts';
import {
  dependencyNameOf,
  type Engine,
  imageSettingOf,
  READY_TIMEOUT_MS,
} from '../engine/dependency-engines.ts';
import { engineError, pullImage } from '../engine/images.ts';
import { LABEL, networkName } from '../engine/labels.ts';
import { lastOutput } from '../engine/output.ts';
import { type Dependency, EngineResources } from '../engine/resources.ts';
import type { DockerSettings } from '../engine/settings.ts';
import type { EnvironmentRef, ResourceRequest } from '../provider.ts';
import { waitReady } from './health.ts';

const isGone = (error: unknown) => (error as { statusCode?: number }).statusCode === 404;

export class DockerResources extends EngineResources<DockerSettings> {
  /** The Engine's memory, read once. */
  private machineMemory: number | undefined;

  protected readonly driver = 'docker';

  protected async provision(
    request: ResourceRequest,
    dependency: Dependency,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const { engine, name, runName: containerName } = dependency;
    let info = await this.inspect(containerName);
    // Another engine under the same name (the declared engine changed) is a different database.
    if (info && info.Config.Labels[LABEL.engine] !== engine.name) {
      signal.throwIfAborted();
      await this.removeAll(name);
      info = null;
    }
    let password = info ? variableOf(info.Config.Env, engine.passwordVariable) : undefined;
    if (!info) {
      signal.throwIfAborted();
      password = engine.passwordVariable ? request.password : undefined;
      info = await this.create(request, dependency, password ?? '');
    } else if (!info.State.Running) {
      await this.docker
        .getContainer(info.Id)
        .start()
        .catch((error: unknown) => {
          throw engineError(error, `the Docker Engine could not start ${containerName}`);
        });
    }
    const container = this.docker.getContainer(info.Id);
    await this.waitAccepting(container, request.environment, dependency, signal);
    // Restarted with the engine only once up: a first start that fails must fail, not loop. The memory
    // cap follows the declared instance_type on every ensure: a changed one updates it in place.
    await container.update({
      RestartPolicy: { Name: 'unless-stopped' },
      ...(await this.memoryOf(request.resource)),
    });
    return password;
  }

  /**
   * A copy of a dependency under `name`, to restore a backup into for inspection: made anew and empty
   * (whatever an earlier copy held goes), with the dependency's password, and ready for connections.
   */
  async makeCopy(
    request: Pick<ResourceRequest, 'service' | 'environment' | 'resource'>,
    name: string,
    password: string,
    signal: AbortSignal,
  ): Promise<Docker.ContainerInspectInfo> {
    const dependency = this.dependencyOf(request, name);
    signal.throwIfAborted();
    await this.removeAll(name);
    const info = await this.create(request, dependency, password);
    const container = this.docker.getContainer(info.Id);
    await this.waitAccepting(container, request.environment, dependency, signal);
    return container.inspect();
  }

  /** Until the dependency's container accepts connections on its engine's port. */
  private async waitAccepting(
    container: Docker.Container,
    environment: EnvironmentRef,
    { engine, runName }: Dependency,
    signal: AbortSignal,
  ): Promise<void> {
    const network = networkName(environment.id);
    const ip = (await container.inspect()).NetworkSettings.Networks[network]?.IPAddress ?? '';
    const ready = await waitReady(
      this.docker,
      [{ container, ip }],
      null,
      engine.port,
      Date.now() + READY_TIMEOUT_MS,
      signal,
    );
    if (!ready.ok) {
      throw new TerminalError(
        `${runName} (${engine.name}) did not accept connections: ${ready.reason}.${await tail(container)}`,
      );
    }
  }

  /**
   * The memory of the declared `instance_type`'s class on the hosted cloud (domain/instance-memory.ts),
   * without swap as there; the machine's whole memory for a class not known or none declared (an Engine
   * cannot lift a cap once set, so "no cap" is the most there is).
   */
  private async memoryOf(resource: OpsResource): Promise<{ Memory: number; MemorySwap: number }> {
    let bytes = instanceMemoryBytes(resource.kind, resource.properties.instance_type);
    if (bytes === null) {
      this.machineMemory ??= (await this.docker.info()).MemTotal as number;
      bytes = this.machineMemory;
    }
    return { Memory: bytes, MemorySwap: bytes };
  }

  private async inspect(containerName: string): Promise<Docker.ContainerInspectInfo | null> {
    try {
      return await this.docker.getContainer(containerName).inspect();
    } catch (error) {
      if (isGone(error)) return null;
      throw error;
    }
  }

  /** The container and its volume, with the data: what an earlier run left of them too. */
  protected async removeAll(name: string): Promise<void> {
    const containerName = dependencyNameOf(name);
    await this.docker
      .getContainer(containerName)
      .remove({ force: true, v: true })
      .catch((error: unknown) => {
        if (!isGone(error)) throw error;
      });
    await this.docker
      .getVolume(containerName)
      .remove()
      .catch((error: unknown) => {
        if (!isGone(error)) throw error;
      });
  }

  private async create(
    { environment, resource }: Pick<ResourceRequest, 'environment' | 'resource'>,
    { engine, name, runName: containerName, labels }: Dependency,
    password: string,
  ): Promise<Docker.ContainerInspectInfo> {
    const network = await this.ensureNetwork(environment);
    const image = this.settings.dependencyImages[engine.name];
    await this.ensureImage(image, engine, resource);
    await this.docker.createVolume({ Name: containerName, Labels: labels });
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        name: containerName,
        // The address services use is also the container's own name: s3rver serves requests to its
        // own host name path-style (/bucket/key), where any other name would be taken for a bucket.
        Hostname: name,
        Image: image,
        Env: Object.entries(engine.environment(name, password)).map(([k, v]) => `${k}=${v}`),
        Labels: labels,
        HostConfig: {
          NetworkMode: network,
          Mounts: [{ Type: 'volume', Source: containerName, Target: engine.dataDir }],
          ...(await this.memoryOf(resource)),
        },
        NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [name] } } },
      });
    } catch (error) {
      // Made meanwhile by another worker running the same job: theirs is the one.
      const made =
        (error as { statusCode?: number }).statusCode === 409 && (await this.inspect(containerName));
      if (made) return made;
      throw engineError(error, `the Docker Engine refused ${containerName}`);
    }
    await container.start().catch((error: unknown) => {
      throw engineError(error, `the Docker Engine could not start ${containerName}`);
    });
    return container.inspect();
  }

  /** The image must be on the engine, or be pulled from where its name says. */
  private async ensureImage(image: string, engine: Engine, resource: OpsResource): Promise<void> {
    const present = await this.docker
      .getImage(image)
      .inspect()
      .then(() => true)
      .catch(() => false);
    if (present) return;
    try {
      await pullImage(this.docker, image, this.settings.pullTimeoutMs);
    } catch (error) {
      throw new TerminalError(
        `the ${engine.name} image ${image} for ${resource.kind} ${resource.type} ${resource.id} is not on ` +
          `this engine and could not be pulled (${(error as Error).message}); build the default images ` +
          `with tools/dependency-images/build.sh or set ${imageSettingOf(engine)}`,
      );
    }
  }
}

function variableOf(env: string[] | undefined, name: string | undefined): string | undefined {
  if (!name) return undefined;
  const entry = env?.find((e) => e.startsWith(`${name}=`));
  return entry?.slice(name.length + 1);
}

/** The last lines a dependency printed, for a failure reason (its passwords are masked by the log). */
function tail(container: Docker.Container): Promise<string> {
  return lastOutput(() => container.logs({ stdout: true, stderr: true, tail: 10, follow: false }));
}

/**
 * What the Engine drivers' ops.json dependencies share: each runs from its engine's configured image
 * (dependency-engines.ts) on the environment's network, named after its resource and labelled with what
 * it is, with a copy made beside it when a restore is inspected; deleting a dependency removes both. A
 * driver gives how one is made ready, and removed (a container, a swarm service).
 * @module
 */
import type Docker from 'dockerode';
import { resourceName } from '../../domain/resource-names.ts';
import type {
  EnvironmentRef,
  ProvisionedResource,
  ResourceKey,
  ResourceRequest,
  Resources,
  ServiceRef,
} from '../provider.ts';
import {
  attributesOf,
  copyNameOf,
  dependencyLabels,
  dependencyNameOf,
  type Engine,
  engineOf,
} from './dependency-engines.ts';
import type { DockerSettings } from './settings.ts';

/** A dependency as a driver makes it. */
export interface Dependency {
  engine: Engine;
  /** Its name: its address on the environment's network. */
  name: string;
  /** Its container's (docker) or swarm service's name, and its volume's. */
  runName: string;
  /** What its container or service and its volume carry. */
  labels: Record<string, string>;
}

export abstract class EngineResources<S extends DockerSettings> implements Resources {
  protected abstract readonly driver: 'docker' | 'swarm';
  protected readonly docker: Docker;
  protected readonly settings: S;
  protected readonly ensureNetwork: (env: EnvironmentRef) => Promise<string>;

  constructor(docker: Docker, settings: S, ensureNetwork: (env: EnvironmentRef) => Promise<string>) {
    this.docker = docker;
    this.settings = settings;
    this.ensureNetwork = ensureNetwork;
  }

  /** Makes (or finds) the dependency, running and ready for connections; its password, when it has one. */
  protected abstract provision(
    request: ResourceRequest,
    dependency: Dependency,
    signal: AbortSignal,
  ): Promise<string | undefined>;

  /** The dependency `name` and its data: what an earlier run left of them too. */
  protected abstract removeAll(name: string): Promise<void>;

  ensure(request: ResourceRequest, signal: AbortSignal): Promise<ProvisionedResource> {
    return this.ensureNamed(request, resourceName(request.service.id, request.resource), signal);
  }

  async delete(service: ServiceRef, resource: ResourceKey): Promise<void> {
    const name = resourceName(service.id, resource);
    await this.removeAll(name);
    // And the copy a restore made of it for inspection, if any.
    await this.removeAll(copyNameOf(name));
  }

  /** The dependency `name` made (or found) as `request` declares it. */
  protected async ensureNamed(
    request: ResourceRequest,
    name: string,
    signal: AbortSignal,
  ): Promise<ProvisionedResource> {
    const dependency = this.dependencyOf(request, name);
    const password = await this.provision(request, dependency, signal);
    return {
      attributes: attributesOf(request.environment, request.resource, name, dependency.engine),
      ...(password === undefined ? {} : { password }),
    };
  }

  protected dependencyOf(
    { environment, service, resource }: Pick<ResourceRequest, 'service' | 'environment' | 'resource'>,
    name: string,
  ): Dependency {
    const engine = engineOf(resource, this.driver);
    const labels = dependencyLabels(environment, service, resource, engine);
    return { engine, name, runName: dependencyNameOf(name), labels };
  }
}

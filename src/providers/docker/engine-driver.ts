import type { EnvironmentIdentity, EnvironmentRef, Serving, Sources } from '../provider.ts';
import { ingressIdentity } from './environment.ts';
import { readFromGit } from './git-build.ts';
import type { Ingress } from './ingress.ts';
import type { DockerSettings } from './settings.ts';

/**
 * What the drivers on the Docker Engine API (docker, swarm) share beside their rollout (rollout.ts): an
 * environment is a network, reached through the ingress this process may serve; git sources are read
 * from the same host.
 */
export abstract class EngineDriver {
  abstract readonly serving: Serving;
  protected readonly settings: DockerSettings;
  /** The ingress, when this process serves (`berth serve`). */
  protected ingress: Ingress | undefined;
  readonly sources: Sources = {
    readFile: (request) => readFromGit(this.settings.gitBaseUrl, request),
  };

  constructor(settings: DockerSettings) {
    this.settings = settings;
  }

  /** The environment's network, made once; its name. */
  protected abstract ensureNetwork(env: EnvironmentRef): Promise<string>;

  async ensureEnvironment(env: EnvironmentRef): Promise<void> {
    await this.ensureNetwork(env);
  }

  async identity(): Promise<EnvironmentIdentity> {
    return ingressIdentity(this.settings);
  }

  domainValidationZone(): string {
    return 'acm-validations.berth.local';
  }

  async close(): Promise<void> {
    await this.serving.stop();
  }
}

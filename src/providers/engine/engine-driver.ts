import type { Logger } from 'pino';
import {
  type Applied,
  type DeployLog,
  DeploymentCancelled,
  type DesiredService,
  type EnvironmentIdentity,
  type EnvironmentRef,
  type ServiceRef,
  type Serving,
  SILENT_LOG,
  type Sources,
} from '../provider.ts';
import { ingressIdentity } from './environment.ts';
import { readFromGit } from './git-build.ts';
import { type Ingress, type RouteTarget, startIngress } from './ingress.ts';
import type { OpsCronJobs } from './ops-cron.ts';
import { type Prepared, type RolloutEngine, rollout } from './rollout.ts';
import { bury } from './routes.ts';
import type { Schedules } from './schedules.ts';
import type { DockerSettings } from './settings.ts';
import type { DockerDb } from './tables.ts';
import { Traffic } from './traffic.ts';

/**
 * What the drivers on the Docker Engine API (docker, swarm) share: the rollout (rollout.ts) behind
 * `apply`, the tombstone behind `remove`, what `berth serve` runs beside the API (the ingress, the cron
 * schedules), environments as networks reached through the ingress, and git sources read from the same
 * host. A driver gives its engine calls.
 */
export abstract class EngineDriver<P extends Prepared> {
  protected readonly settings: DockerSettings;
  protected readonly logger: Logger;
  /** The ingress, when this process serves (`berth serve`). */
  protected ingress: Ingress | undefined;
  private counted: Traffic | undefined;
  protected abstract readonly db: DockerDb;
  protected abstract readonly cron: Schedules;
  protected abstract readonly opsCron: OpsCronJobs;
  protected abstract readonly engine: RolloutEngine<P>;
  readonly sources: Sources = {
    readFile: (request) => readFromGit(this.settings.gitBaseUrl, request),
  };
  readonly serving: Serving = {
    start: async (context) => {
      this.stopping = undefined;
      const certificates = context?.certificates;
      this.ingress = await startIngress({
        db: this.db,
        targets: (route) => this.ingressTargets(route),
        logger: this.logger,
        host: this.settings.ingressBind,
        port: this.settings.ingressPort,
        ingressHost: this.settings.ingressHost,
        traffic: this.traffic,
        ...(certificates && {
          tls: { certificates, port: this.settings.ingressHttpsPort, proxy: this.settings.ingressProxy },
        }),
      });
      this.traffic.start();
      await this.cron.start();
      await this.opsCron.start();
      await this.started();
    },
    // A shutdown may ask more than once (a signal, then close): every call waits for the one stop.
    stop: () => {
      this.stopping ??= (async () => {
        this.cron.stop();
        this.opsCron.stop();
        await this.ingress?.close();
        // What the ingress answered last, for the collector (in this process or another).
        await this.traffic.stop();
        await this.stopped();
      })();
      return this.stopping;
    },
  };
  private stopping: Promise<void> | undefined;
  /** The ingress terminates TLS with the certificates Berth orders by ACME. */
  readonly certificates = 'acme' as const;
  get ingressDomain(): string {
    return this.settings.ingressHost;
  }

  constructor(settings: DockerSettings, logger: Logger) {
    this.settings = settings;
    this.logger = logger;
  }

  /** What the ingress answered per service since each one's last metrics sample (made once the driver's tables are). */
  protected get traffic(): Traffic {
    this.counted ??= new Traffic(this.db);
    return this.counted;
  }

  /** The environment's network, made once; its name. */
  protected abstract ensureNetwork(env: EnvironmentRef): Promise<string>;
  /** Where a routed web service's replicas answer now, as `host:port`. */
  protected abstract ingressTargets(route: RouteTarget): Promise<string[]>;
  /** A rollout the user cancelled: what it started goes (no other worker takes it over). */
  protected abstract cancelled(desired: DesiredService, log: DeployLog): Promise<void>;
  /** Everything the service runs, after its tombstone is in place. */
  protected abstract removeWorkloads(service: ServiceRef): Promise<void>;

  /** After `serving` started the ingress and the schedules. */
  protected started(): Promise<void> {
    return Promise.resolve();
  }

  /** After `serving` stopped the ingress and the schedules. */
  protected stopped(): Promise<void> {
    return Promise.resolve();
  }

  /** After every apply, whatever its outcome. */
  protected settled(_desired: DesiredService): Promise<void> {
    return Promise.resolve();
  }

  async apply(desired: DesiredService, signal: AbortSignal, log: DeployLog = SILENT_LOG): Promise<Applied> {
    try {
      return await rollout(this.engine, desired, signal, log);
    } catch (error) {
      // A lost lease leaves what runs to the worker that took over; a cancel has no such worker.
      if (signal.reason instanceof DeploymentCancelled) await this.cancelled(desired, log);
      throw error;
    } finally {
      await this.settled(desired);
    }
  }

  async remove(service: ServiceRef): Promise<void> {
    // The tombstone first: from here no apply of any generation routes or promotes the service again.
    await bury(this.db, service.id);
    // Nor does the ingress serve it from its cache: a swarm's tasks answer while they stop.
    this.ingress?.forget();
    await this.removeWorkloads(service);
  }

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

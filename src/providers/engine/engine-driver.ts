import type Docker from 'dockerode';
import type { Logger } from 'pino';
import type {
  Applied,
  DeployLog,
  DesiredService,
  EnvironmentIdentity,
  EnvironmentRef,
  Observed,
  Provider,
  ServiceLogs,
  ServiceMetrics,
  ServiceRef,
  Serving,
  Sources,
} from '../provider.ts';
import { DeploymentCancelled, SILENT_LOG } from '../provider.ts';
import { ingressIdentity } from './environment.ts';
import { readFromGit } from './git-build.ts';
import { type Ingress, type RouteTarget, startIngress } from './ingress.ts';
import { EngineLogs, type LogSource } from './logs.ts';
import { OpsCronJobs, type OpsCronRequest } from './ops-cron.ts';
import { type Prepared, type RolloutEngine, rollout, type Strategies, strategyOf } from './rollout.ts';
import { bury, DELETED, observedRoute } from './routes.ts';
import type { Schedules } from './schedules.ts';
import type { DockerSettings } from './settings.ts';
import type { DockerDb } from './tables.ts';
import { Traffic } from './traffic.ts';

/** What a driver on the Engine API is made of before its own parts. */
export interface EngineParts<S extends DockerSettings, D extends DockerDb> {
  settings: S;
  logger: Logger;
  /** The Engine API the driver talks to (the swarm's: a manager's). */
  docker: Docker;
  /** The driver's tables, the shared routing tables among them. */
  db: D;
}

/**
 * What the drivers on the Docker Engine API (docker, swarm) share: the rollout (rollout.ts) behind
 * `apply`, the service type's strategy behind `observe`, the tombstone behind `remove`, what `berth
 * serve` runs beside the API (the ingress, the cron schedules), environments as networks reached through
 * the ingress, git sources read from the same host, logs and ops.json cron jobs. A driver gives its
 * engine calls: a strategy per service type and what they are built on.
 */
export abstract class EngineDriver<P extends Prepared, S extends DockerSettings, D extends DockerDb>
  implements Provider
{
  protected readonly settings: S;
  protected readonly logger: Logger;
  protected readonly docker: Docker;
  protected readonly db: D;
  /** What the ingress answered per service since each one's last metrics sample. */
  protected readonly traffic: Traffic;
  protected readonly opsCron: OpsCronJobs;
  readonly logs: ServiceLogs;
  abstract readonly metrics: ServiceMetrics;
  /** The ingress, when this process serves (`berth serve`). */
  protected ingress: Ingress | undefined;
  protected abstract readonly cron: Schedules;
  protected abstract readonly driver: 'docker' | 'swarm';
  /** How each service type rolls out and is observed on this driver's engine. */
  protected abstract readonly strategies: Strategies<P>;
  private engine: RolloutEngine<P> | undefined;
  /** An ops.json cron job's request, on each tick of its schedule. */
  protected abstract readonly opsCronRequest: OpsCronRequest;
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
          tls: {
            certificates,
            port: this.settings.ingressHttpsPort,
            proxy: this.settings.ingressProxy,
            alpnChallenges: this.settings.ingressAlpnChallenges,
          },
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

  constructor({ settings, logger, docker, db }: EngineParts<S, D>) {
    this.settings = settings;
    this.logger = logger;
    this.docker = docker;
    this.db = db;
    this.traffic = new Traffic(db);
    this.opsCron = new OpsCronJobs(db, logger, (job, at) => this.opsCronRequest(job, at));
    this.logs = new EngineLogs(docker, (serviceId) => this.logSources(serviceId));
  }

  /** What a rollout runs (the image, the ops.json it follows) and where; what an earlier attempt left goes. */
  protected abstract prepare(desired: DesiredService, log: DeployLog): Promise<P>;
  /** A newer generation took over first: what this deployment made goes. */
  protected abstract standDown(desired: DesiredService): Promise<void>;
  /** The service's runs that print (containers, swarm services), for its logs. */
  protected abstract logSources(serviceId: string): Promise<LogSource[]>;
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
      return await rollout(this.rolloutEngine(), desired, signal, log);
    } catch (error) {
      // A lost lease leaves what runs to the worker that took over; a cancel has no such worker.
      if (signal.reason instanceof DeploymentCancelled) await this.cancelled(desired, log);
      throw error;
    } finally {
      await this.settled(desired);
    }
  }

  async observe(service: ServiceRef): Promise<Observed> {
    const { route, deleted, generation } = await observedRoute(this.db, service.id);
    if (deleted) return DELETED;
    const state = await this.strategies[strategyOf(service.type)].observe(service, route);
    return { ...state, generation };
  }

  /** What this driver gives the shared rollout: its engine calls, a strategy per type. */
  private rolloutEngine(): RolloutEngine<P> {
    this.engine ??= {
      driver: this.driver,
      db: this.db,
      ingress: () => this.ingress,
      prepare: (desired, _signal, log) => this.prepare(desired, log),
      standDown: (desired) => this.standDown(desired),
      strategies: this.strategies,
    };
    return this.engine;
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

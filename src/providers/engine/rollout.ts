import type { OpsConfig } from '../../domain/ops-json.ts';
import { SupersededError } from '../../jobs/errors.ts';
import {
  type Applied,
  type DeployedSource,
  DeployFailed,
  type DeployLog,
  type DesiredService,
  type Observed,
  type ServiceRef,
} from '../provider.ts';
import type { Ingress } from './ingress.ts';
import { admit, promote, type routeOf } from './routes.ts';
import type { DockerDb } from './tables.ts';

/**
 * The rollout the drivers on the Docker Engine API (docker, swarm) share: admit the generation, resolve
 * what runs, start it the service type's way, move traffic (fenced), then retire what it replaced. The
 * drivers differ only in their engine calls: each gives a `RolloutEngine` with a strategy per type.
 */

/** The version a rollout runs: its image, the ops.json it follows, and where it came from. */
export interface Resolved {
  image: string;
  ops: OpsConfig;
  source: DeployedSource;
}

/** What a rollout resolved before anything of the new version runs. */
export interface Prepared extends Resolved {
  network: string;
}

/** The route in place: none before a service's first deployment took traffic. */
export type RouteInPlace = Awaited<ReturnType<typeof routeOf>>;

/** What runs of a service, less the generation (the route's). */
export type RunState = Omit<Observed, 'generation'>;

export const NOT_DEPLOYED: RunState = { run_status: 'not_deployed', ready_count: 0 };

/** What a strategy starts from: the prepared version, and where and until when it runs. */
export type Run<P extends Prepared> = P & {
  svcAlias: string;
  /** The route in place before this rollout (none on a first deployment). */
  route: RouteInPlace;
  /** When `deploy_timeout` runs out. */
  deadline: number;
};

/** How one service type runs on an engine. */
export interface Strategy<P extends Prepared> {
  /** Makes the new version run; resolves once it is ready to take over (a job: once it ended). */
  start(desired: DesiredService, run: Run<P>, signal: AbortSignal, log: DeployLog): Promise<void>;
  /**
   * After traffic moved to the version (or when the generation in place is applied again: then
   * `replaced` is false and `source` empty): retires what it replaced, and a job reports its outcome.
   */
  retire(
    desired: DesiredService,
    after: { source: DeployedSource; replaced: boolean },
    signal: AbortSignal,
    log: DeployLog,
  ): Promise<void>;
  /** What runs of a service of this type now, by the route in place. */
  observe(service: ServiceRef, route: RouteInPlace): Promise<RunState>;
}

/** A strategy per service type: jobs, crons, and the serving types (web, internal, worker). */
export type Strategies<P extends Prepared> = Record<'job' | 'cron' | 'serving', Strategy<P>>;

export interface RolloutEngine<P extends Prepared> {
  driver: 'docker' | 'swarm';
  db: DockerDb;
  /** The ingress this process serves, if it does: it forgets its cached routes when traffic moves. */
  ingress(): Ingress | undefined;
  /** What a rollout runs (the image, the ops.json it follows) and where; what an earlier attempt left goes. */
  prepare(desired: DesiredService, signal: AbortSignal, log: DeployLog): Promise<P>;
  strategies: Strategies<P>;
  /** A newer generation took over first: what this deployment made goes. */
  standDown(desired: DesiredService): Promise<void>;
}

/**
 * A strategy's start failed: the log says so (capitalised), and the deployment fails with the reason
 * and `detail` (such as the version's last output, which the log shows on lines of its own).
 */
export function rolloutFailed(
  log: DeployLog,
  reason: string,
  source: DeployedSource,
  detail = '',
): DeployFailed {
  log.end('rollout', 'failed', `${reason.charAt(0).toUpperCase()}${reason.slice(1)}`);
  return new DeployFailed(`${reason}${detail}`, source);
}

/** The strategy a service type rolls out and is observed by. */
export const strategyOf = (type: string | null) => (type === 'job' || type === 'cron' ? type : 'serving');

export async function rollout<P extends Prepared>(
  engine: RolloutEngine<P>,
  desired: DesiredService,
  signal: AbortSignal,
  log: DeployLog,
): Promise<Applied> {
  const { applied, route } = await admit(engine.db, desired, engine.driver);
  const strategy = engine.strategies[strategyOf(desired.service.type)];
  // The generation in place (a rerun after a crash, or new domains): no rollout, only the routing.
  if (route?.deployment_id === desired.deploymentId) {
    await promote(engine.db, desired, desired.ops);
    await strategy.retire(desired, { source: {}, replaced: false }, signal, log);
    return applied;
  }
  signal.throwIfAborted();
  const prepared = await engine.prepare(desired, signal, log);
  log.mark('image_resolved');
  applied.source = prepared.source;
  signal.throwIfAborted();
  const run: Run<P> = {
    ...prepared,
    svcAlias: applied.svcAlias,
    route,
    deadline: Date.now() + prepared.ops.deploy_timeout * 60_000,
  };
  await strategy.start(desired, run, signal, log);
  await takeOver(engine, desired, prepared.ops, signal, log);
  await strategy.retire(desired, { source: prepared.source, replaced: route !== undefined }, signal, log);
  return applied;
}

/** A new version takes over, unless a newer generation did meanwhile: then this one stands down. */
async function takeOver<P extends Prepared>(
  engine: RolloutEngine<P>,
  desired: DesiredService,
  ops: OpsConfig,
  signal: AbortSignal,
  log: DeployLog,
): Promise<void> {
  // A worker that lost the job must not move traffic: the one that took it over decides.
  signal.throwIfAborted();
  if (await promote(engine.db, desired, ops)) {
    engine.ingress()?.forget();
    log.mark('routed');
    log.end('traffic', 'success', `Traffic moved to this deployment (generation ${desired.generation})`);
    return;
  }
  log.end(
    'traffic',
    'failed',
    `A newer generation than ${desired.generation} is in place: traffic stays there`,
  );
  await engine.standDown(desired);
  throw new SupersededError(`a newer generation than ${desired.generation} is in place`);
}

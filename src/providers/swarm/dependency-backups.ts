/**
 * Logical backups of ops.json databases and caches on the swarm (engine/dependency-dumps.ts: the
 * helpers, the files). The helper containers run on the Engine Berth talks to (a manager), attached to
 * the environment's overlay (it is attachable), and reach the dependency by its alias wherever its task
 * runs: a logical dump needs neither the dependency's node nor its volume. The password is the one Berth
 * sealed when it made the dependency (the swarm secret holding it cannot be read back), given to the
 * client as a variable. Redis reads a dump only at start, and its volume is on another node: a helper
 * serves the dump from a redis of its own, the dependency replicates it (REPLICAOF: a full sync
 * replaces its data, and rewrites its append-only file) and is made a primary again. The services using
 * a restored dependency are scaled to no replicas for the duration, their count kept in a label so a
 * retry after a crash gives back the count they had, and the attempt holding them down in another, so
 * that only it scales them back.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import {
  type CopyRequest,
  type DumpTarget,
  EngineDependencyBackups,
  isGone,
} from '../engine/dependency-dumps.ts';
import { dependencyNameOf, type Engine } from '../engine/dependency-engines.ts';
import { pullImage } from '../engine/images.ts';
import { LABEL, replicaFilter } from '../engine/labels.ts';
import type { BackupRequest, EnvironmentRef, ServiceRef } from '../provider.ts';
import type { SwarmResources } from './resources.ts';
import { describeTask, tasksOf } from './services.ts';

/** How long a stopped service's tasks have to end (their grace period is 10 s; a node may be slow). */
const STOP_TIMEOUT_MS = 120_000;
const POLL_MS = 500;
/**
 * How long a scaled-down service's tasks may stay live before its spec is written again. The swarm
 * can leave a scale-down unacted on (a task still desired running, or desired removed and never
 * stopped) until the service is updated once more: seen here between back-to-back restores, and
 * reported for `docker service scale` since Engine 24 (moby/moby#36527, where scaling twice works).
 */
const NUDGE_MS = 15_000;

/**
 * Replaces the data of the redis at $DEPENDENCY with the RDB on stdin: a redis in the helper loads it
 * (answering PING only once loaded), the dependency becomes its replica until the full sync is done
 * and its append-only file rewritten from the new data, then a primary again, also when this fails
 * midway (a task killed with the helper leaves a replica of nothing, which the retry makes a primary).
 * The dependency reaches the helper at the address it sees the helper's own connection come from.
 */
const REDIS_SYNC = [
  'sh',
  '-c',
  [
    'set -e',
    'mkdir -p /tmp/restore',
    'cat > /tmp/restore/dump.rdb',
    "redis-server --dir /tmp/restore --dbfilename dump.rdb --appendonly no --save '' --port 6390 --bind 0.0.0.0 --protected-mode no --daemonize yes",
    'until redis-cli -p 6390 ping 2>/dev/null | grep -q PONG; do sleep 0.1; done',
    'dep() { redis-cli -h "$DEPENDENCY" "$@"; }',
    // Two minutes for each step, polled every tenth of a second.
    'until_dep() { n=0; until dep info "$1" | grep -q "$2"; do n=$((n + 1)); test $n -lt 1200 || { echo "$3" >&2; exit 1; }; sleep 0.1; done; }',
    'me=$(dep client info | tr " " "\\n" | sed -n "s/^addr=\\(.*\\):[0-9]*$/\\1/p")',
    'test -n "$me" || { echo "the dependency $DEPENDENCY did not answer" >&2; exit 1; }',
    "trap 'dep replicaof no one >/dev/null' EXIT",
    'dep replicaof "$me" 6390 >/dev/null',
    'until_dep replication "master_link_status:up" "the dependency did not load the dump within 2 minutes"',
    'until_dep persistence "aof_rewrite_in_progress:0" "the dependency did not rewrite its append-only file within 2 minutes"',
    'until_dep persistence "aof_rewrite_scheduled:0" "the dependency did not rewrite its append-only file within 2 minutes"',
    'dep replicaof no one | grep -q OK',
    'trap - EXIT',
  ].join('\n'),
];

/**
 * A spec scaled back from a restore's hold to the replicas it had, its hold's labels gone; null when
 * nothing holds it, or `holder` is given and does not.
 */
function givenBack(spec: Docker.ServiceSpec, holder?: string): Docker.ServiceSpec | null {
  const { [LABEL.restoreReplicas]: had, [LABEL.restoreHolder]: by, ...labels } = spec.Labels ?? {};
  if (had === undefined || (holder !== undefined && by !== holder)) return null;
  return { ...spec, Labels: labels, Mode: { Replicated: { Replicas: Number(had) } } };
}

export class SwarmDependencyBackups extends EngineDependencyBackups {
  private readonly resources: SwarmResources;
  private readonly pullTimeoutMs: number;

  constructor(docker: Docker, backupDir: string, resources: SwarmResources, pullTimeoutMs: number) {
    super(docker, backupDir);
    this.resources = resources;
    this.pullTimeoutMs = pullTimeoutMs;
  }

  protected readonly driver = 'swarm';

  /** The password is the one Berth sealed (its swarm secret cannot be read back); the image, its own. */
  protected async runOf(request: BackupRequest, runName: string, engine: Engine) {
    if (engine.passwordVariable && !request.password) {
      throw new TerminalError(`Berth keeps no password for ${runName}: deploy the service to make it again`);
    }
    return { image: await this.imageOf(runName), password: request.password };
  }

  /** The image the dependency's service runs (by digest): the helpers run from the same. */
  private async imageOf(runName: string): Promise<string> {
    const service = await this.docker
      .getService(runName)
      .inspect()
      .catch((error: unknown) => {
        if (isGone(error)) throw new TerminalError(`the dependency's swarm service ${runName} is gone`);
        throw error;
      });
    const image = (service.Spec?.TaskTemplate as Docker.ContainerTaskSpec | undefined)?.ContainerSpec?.Image;
    if (!image) throw new TerminalError(`the dependency's swarm service ${runName} names no image`);
    return image;
  }

  protected async makeCopy({ request, name, password }: CopyRequest, signal: AbortSignal) {
    await this.resources.makeCopy({ ...request, password }, name, signal);
    const runName = dependencyNameOf(name);
    return { runName, image: await this.imageOf(runName) };
  }

  /** The helpers run on the manager's own Engine, which pulls the image from where every node does. */
  protected async ensureImage(image: string): Promise<void> {
    const present = await this.docker
      .getImage(image)
      .inspect()
      .then(() => true)
      .catch(() => false);
    if (!present) await pullImage(this.docker, image, this.pullTimeoutMs);
  }

  protected async loadRedis(request: BackupRequest, target: DumpTarget, file: string): Promise<void> {
    await this.expectSuccess(
      'loading the redis dump',
      await this.runHelper(request.environment, target.runName, target.image, {
        cmd: REDIS_SYNC,
        env: [`DEPENDENCY=${target.address.address}`],
        stdin: file,
      }),
    );
  }

  /**
   * Scales the services' swarm services to no replicas until their tasks ended; the result scales them
   * back. The hold is this attempt's own (a holder label beside the count): an attempt that lost its
   * job's lease and runs on gives back only a hold that is still its own, never one a later attempt of
   * the job, or the next restore, has taken since (it would start the service under their restore).
   */
  protected async stopServices(services: ServiceRef[], signal: AbortSignal): Promise<() => Promise<void>> {
    const holder = randomUUID();
    const stopped: string[] = [];
    const restart = async () => {
      for (const id of stopped) {
        await this.scale(id, (spec) => givenBack(spec, holder));
      }
    };
    try {
      for (const service of services) {
        for (const { ID } of await this.replicaServicesOf(service)) {
          signal.throwIfAborted();
          await this.scale(ID, (spec) => {
            const labels = spec.Labels ?? {};
            // A retry after a crash finds it scaled down already, with the count it had in the label.
            const had = labels[LABEL.restoreReplicas] ?? String(spec.Mode?.Replicated?.Replicas ?? 1);
            return {
              ...spec,
              Labels: { ...labels, [LABEL.restoreReplicas]: had, [LABEL.restoreHolder]: holder },
              Mode: { Replicated: { Replicas: 0 } },
            };
          });
          stopped.push(ID);
        }
      }
      for (const id of stopped) await this.waitStopped(id, signal);
    } catch (error) {
      await restart();
      throw error;
    }
    return restart;
  }

  /**
   * Scales back every replica service of `services` that a restore holds, whichever attempt holds it:
   * the job that gave up was the last to (the jobs layer releases nothing another restore still holds).
   */
  async release(_environment: EnvironmentRef, services: ServiceRef[]): Promise<void> {
    for (const service of services) {
      for (const { ID } of await this.replicaServicesOf(service)) {
        await this.scale(ID, (spec) => givenBack(spec));
      }
    }
  }

  /** The swarm services running the service's replicas. */
  private replicaServicesOf(service: ServiceRef): Promise<Docker.Service[]> {
    return this.docker.listServices({
      filters: replicaFilter(service.id),
    });
  }

  /**
   * Updates a swarm service's spec (not its tasks' template: no rollout), one that is gone left so, and
   * so is one `change` leaves (null). The version check refuses a write based on a stale read.
   */
  private async scale(
    id: string,
    change: (spec: Docker.ServiceSpec) => Docker.ServiceSpec | null,
  ): Promise<void> {
    const service = await this.docker
      .getService(id)
      .inspect()
      .catch((error: unknown) => {
        if (isGone(error)) return null;
        throw error;
      });
    if (!service) return;
    const changed = change(service.Spec as Docker.ServiceSpec);
    if (changed) await this.docker.getService(id).update({ ...changed, version: service.Version?.Index });
  }

  /** Until no task of the service is meant to run or still runs; the error says what each one was doing. */
  private async waitStopped(id: string, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + STOP_TIMEOUT_MS;
    let nudgeAt = Date.now() + NUDGE_MS;
    for (;;) {
      signal.throwIfAborted();
      // A service that is gone has no tasks; any other error is no sign that they stopped.
      const tasks = await tasksOf(this.docker, id).catch((error: unknown) => {
        if (isGone(error)) return [];
        throw error;
      });
      const live = tasks.filter((t) => t.DesiredState === 'running' || t.Status.State === 'running');
      if (live.length === 0) return;
      if (Date.now() > deadline) {
        throw new TerminalError(
          `the swarm service ${id} did not stop its ${live.length} task(s) in time for the restore: ${live.map(describeTask).join('; ')}`,
        );
      }
      if (Date.now() >= nudgeAt) {
        // The same spec again, as long as it still holds the service at no replicas.
        await this.scale(id, (spec) => (spec.Mode?.Replicated?.Replicas === 0 ? spec : null));
        nudgeAt = Date.now() + NUDGE_MS;
      }
      await sleep(POLL_MS, undefined, { signal }).catch(() => signal.throwIfAborted());
    }
  }
}

/**
 * Logical backups of ops.json databases and caches on the docker provider (engine/dependency-dumps.ts:
 * the helpers, the files): the dependency is its container, its password read from it; a copy for
 * inspection is a container of its own (resources.ts); the services using a restored dependency have
 * their replicas stopped. Redis, which loads a dump only at start, is stopped and its volume loaded by a
 * helper container instead.
 * @module
 */
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import {
  type CopyRequest,
  type DumpTarget,
  EngineDependencyBackups,
  isGone,
} from '../engine/dependency-dumps.ts';
import { dependencyNameOf, type Engine } from '../engine/dependency-engines.ts';
import { LABEL, replicaFilter } from '../engine/labels.ts';
import type { BackupRequest, EnvironmentRef, ServiceRef } from '../provider.ts';
import type { DockerResources } from './resources.ts';

/**
 * Loads /data/dump.rdb into a redis volume whose server runs with an append-only file: a server on the
 * volume loads the RDB with the AOF off, turns it on (which rewrites the AOF from the loaded data) and
 * shuts down once it may (it refuses while that first rewrite runs). The dependency then starts from it.
 */
const REDIS_LOAD = [
  'sh',
  '-c',
  [
    'set -e',
    'rm -rf /data/appendonlydir /data/appendonly.aof',
    'cat > /data/dump.rdb',
    'redis-server --dir /data --appendonly no --port 6390 --bind 127.0.0.1 --daemonize yes',
    'until redis-cli -p 6390 ping 2>/dev/null | grep -q PONG; do sleep 0.1; done',
    'redis-cli -p 6390 config set appendonly yes >/dev/null',
    'while redis-cli -p 6390 ping >/dev/null 2>&1; do redis-cli -p 6390 shutdown >/dev/null 2>&1 || true; sleep 0.2; done',
    'test -d /data/appendonlydir',
  ].join('\n'),
];

const notModified = (error: unknown) => {
  if ((error as { statusCode?: number }).statusCode !== 304) throw error;
};

export class DockerDependencyBackups extends EngineDependencyBackups {
  private readonly resources: DockerResources;

  constructor(docker: Docker, backupDir: string, resources: DockerResources) {
    super(docker, backupDir);
    this.resources = resources;
  }

  protected readonly driver = 'docker';

  /** The dependency's container: its image, and its password from its variables. */
  protected async runOf(_request: BackupRequest, runName: string, engine: Engine) {
    const info = await this.docker
      .getContainer(runName)
      .inspect()
      .catch((error: unknown) => {
        if (isGone(error)) throw new TerminalError(`the dependency's container ${runName} is gone`);
        throw error;
      });
    const password = engine.passwordVariable
      ? info.Config.Env?.find((e) => e.startsWith(`${engine.passwordVariable}=`))?.slice(
          engine.passwordVariable.length + 1,
        )
      : undefined;
    return { image: info.Config.Image, password };
  }

  protected async makeCopy({ request, name, password }: CopyRequest, signal: AbortSignal) {
    const info = await this.resources.makeCopy(request, name, password, signal);
    return { runName: info.Name.replace(/^\//, ''), image: info.Config.Image };
  }

  /** The dependency's image is on the Engine: its container runs from it. */
  protected async ensureImage(): Promise<void> {}

  /**
   * Redis: its container stops, a helper loads the dump into its volume, and it starts again, unless
   * this attempt lost its job's lease: the attempt that took the job over may be loading the volume,
   * and starts it at its end (a job that gives up leaves it to the next deployment, which starts a
   * stopped dependency).
   */
  protected async loadRedis(request: BackupRequest, target: DumpTarget, file: string, signal: AbortSignal) {
    const container = this.docker.getContainer(dependencyNameOf(target.name));
    const info = await container.inspect();
    await container.stop().catch(notModified);
    try {
      const volume = info.Mounts.find((m) => m.Destination === '/data')?.Name;
      if (!volume) throw new TerminalError(`${info.Name} has no data volume`);
      await this.expectSuccess(
        'loading the redis dump',
        await this.runHelper(request.environment, target.runName, target.image, {
          cmd: REDIS_LOAD,
          env: [],
          stdin: file,
          mounts: [{ Type: 'volume', Source: volume, Target: '/data' }],
        }),
      );
    } finally {
      if (!signal.aborted) await container.start().catch(notModified);
    }
  }

  /**
   * Stops the replicas of the services using the dependency; the result starts them again, unless this
   * attempt lost its job's lease meanwhile: the attempt that took the job over holds them stopped for
   * its own restore and starts them at its end (started here, they would run while it loads the data).
   */
  protected async stopServices(services: ServiceRef[], signal: AbortSignal): Promise<() => Promise<void>> {
    const stopped: Docker.Container[] = [];
    for (const service of services) {
      for (const replica of await this.replicasOf(service)) {
        const container = this.docker.getContainer(replica.Id);
        // A retry after a crash finds them stopped already: they are started again after all the same.
        await container.stop().catch(notModified);
        stopped.push(container);
      }
    }
    return async () => {
      if (signal.aborted) return;
      for (const container of stopped) await container.start().catch(notModified);
    };
  }

  /**
   * Starts the stopped replicas of each service's newest generation: an older generation's are being
   * retired (stopped, then removed), never given back.
   */
  async release(_environment: EnvironmentRef, services: ServiceRef[]): Promise<void> {
    for (const service of services) {
      const replicas = await this.replicasOf(service);
      const generationOf = (c: Docker.ContainerInfo) => Number(c.Labels[LABEL.generation] ?? 0);
      const newest = Math.max(...replicas.map(generationOf));
      for (const replica of replicas) {
        if (replica.State === 'running' || generationOf(replica) !== newest) continue;
        await this.docker
          .getContainer(replica.Id)
          .start()
          .catch((error: unknown) => {
            if (!isGone(error)) notModified(error);
          });
      }
    }
  }

  /** The service's replica containers, stopped ones included. */
  private replicasOf(service: ServiceRef): Promise<Docker.ContainerInfo[]> {
    return this.docker.listContainers({
      all: true,
      filters: replicaFilter(service.id),
    });
  }
}

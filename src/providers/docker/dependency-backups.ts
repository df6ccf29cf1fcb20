/**
 * Logical backups of ops.json databases and caches on the docker provider. Each dump runs in a
 * container of its own, from the dependency's own image (it carries the engine's client tools: pg_dump,
 * mariadb-dump, redis-cli), on the environment's network, reaching the dependency by its address as a
 * service would; its output streams into a file under the backup target (BERTH_DEPENDENCY_BACKUP_DIR),
 * written under a temporary name and renamed once complete and synced. So Berth's process needs no
 * access to the Engine's file system, and nothing runs inside the dependency's own container.
 * A restore streams the file into the engine's client the same way; redis, which loads a dump only at
 * start, is stopped and its volume loaded by a helper container instead.
 * @module
 */
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import type { BackupRequest, DependencyBackups, EnvironmentRef, ServiceRef } from '../provider.ts';
import { attributesOf, copyNameOf, dependencyOf, type Engine } from './dependency-engines.ts';
import { engineError } from './images.ts';
import { LABEL, labelFilter, networkName } from './labels.ts';
import type { DockerResources } from './resources.ts';

/** What a dump of each engine is, how it is made and read back. */
interface DumpTool {
  extension: string;
  /** The command printing the dump on stdout. */
  dump: (address: Record<string, string>) => string[];
  /** The command reading the dump on stdin into the running dependency; none: loaded at start (redis). */
  load?: (address: Record<string, string>) => string[];
  /** The variable the client reads the password from. */
  passwordVariable?: string;
}

const TOOLS: Partial<Record<Engine['name'], DumpTool>> = {
  postgres: {
    extension: 'sql',
    // --clean --if-exists: the dump drops what it recreates, so it restores over the data in place.
    dump: (a) => [
      'pg_dump',
      '--clean',
      '--if-exists',
      '--no-owner',
      '-h',
      `${a.address}`,
      '-U',
      `${a.username}`,
      '-d',
      `${a.dbName}`,
    ],
    load: (a) => [
      'psql',
      '-q',
      '-v',
      'ON_ERROR_STOP=1',
      '--single-transaction',
      '-h',
      `${a.address}`,
      '-U',
      `${a.username}`,
      '-d',
      `${a.dbName}`,
    ],
    passwordVariable: 'PGPASSWORD',
  },
  mariadb: {
    extension: 'sql',
    // A consistent snapshot without locking the tables the service writes.
    dump: (a) => [
      'mariadb-dump',
      '--single-transaction',
      '-h',
      `${a.address}`,
      '-u',
      `${a.username}`,
      `${a.dbName}`,
    ],
    load: (a) => ['mariadb', '-h', `${a.address}`, '-u', `${a.username}`, `${a.dbName}`],
    passwordVariable: 'MYSQL_PWD',
  },
  redis: {
    extension: 'rdb',
    // redis-cli writes the RDB the server streams (as to a replica) to a file, then prints it.
    dump: (a) => ['sh', '-c', `redis-cli -h ${a.address} --rdb /tmp/dump.rdb >&2 && cat /tmp/dump.rdb`],
  },
};

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

const isGone = (error: unknown) => (error as { statusCode?: number }).statusCode === 404;

/** The last output of a helper, for a failure reason (a password never reaches it: it is a variable). */
const lastLines = (text: string) => text.trim().split('\n').slice(-5).join(' ').slice(-800);

export class DockerDependencyBackups implements DependencyBackups {
  private readonly docker: Docker;
  private readonly backupDir: string;

  private readonly resources: DockerResources;

  constructor(docker: Docker, backupDir: string, resources: DockerResources) {
    this.docker = docker;
    this.backupDir = backupDir;
    this.resources = resources;
  }

  async backup(
    request: BackupRequest,
    signal: AbortSignal,
  ): Promise<{ location: string; sizeBytes: number }> {
    const target = await this.target(request);
    const dir = path.join(this.backupDir, request.environment.id, target.name);
    await mkdir(dir, { recursive: true }).catch((error: Error) => {
      throw new TerminalError(`the backup target ${this.backupDir} is not writable: ${error.message}`);
    });
    const final = path.join(dir, `${request.backupId}.${target.tool.extension}`);
    // Never under its final name until complete: a process killed midway leaves a .partial file, which
    // the next attempt overwrites.
    const partial = `${final}.partial`;
    signal.throwIfAborted();
    const file = createWriteStream(partial);
    const fileDone = once(file, 'close');
    const run = await this.runHelper(request.environment, target.runName, target.info.Config.Image, {
      cmd: target.tool.dump(target.address),
      env: target.env,
      stdout: file,
    }).catch(async (error: unknown) => {
      // The Engine refused or lost the helper: nothing complete was written.
      file.destroy();
      await rm(partial, { force: true });
      throw error;
    });
    await fileDone.catch(() => undefined);
    if (file.errored) {
      await rm(partial, { force: true });
      throw new TerminalError(
        `the backup could not be written to ${this.backupDir}: ${file.errored.message}`,
      );
    }
    if (run.code !== 0) {
      await rm(partial, { force: true });
      throw new TerminalError(
        `${target.tool.dump(target.address)[0]} failed (exit code ${run.code}): ${lastLines(run.stderr)}`,
      );
    }
    try {
      const handle = await open(partial, 'r+');
      await handle.sync().finally(() => handle.close());
      await rename(partial, final);
      const { size } = await stat(final);
      return { location: path.relative(this.backupDir, final), sizeBytes: size };
    } catch (error) {
      await rm(partial, { force: true });
      throw new TerminalError(
        `the backup could not be written to ${this.backupDir}: ${(error as Error).message}`,
      );
    }
  }

  async restore(
    request: BackupRequest & { location: string; stop: ServiceRef[]; into: 'same' | 'new' },
    signal: AbortSignal,
  ): Promise<{ attributes?: Record<string, string> }> {
    const original = await this.target(request);
    const file = this.pathOf(request.location);
    await stat(file).catch(() => {
      throw new TerminalError(`the backup file ${file} is gone from the backup target`);
    });
    signal.throwIfAborted();
    if (request.into === 'same') {
      await this.load(request, original, file, request.stop);
      return {};
    }
    // A copy for inspection: the same engine, image and password, under a name of its own.
    const copyName = copyNameOf(original.name);
    const info = await this.resources.makeCopy(request, copyName, original.password, signal);
    const attributes = attributesOf(request.environment, request.resource, copyName, original.engine);
    await this.load(
      request,
      { ...original, name: copyName, runName: info.Name.replace(/^\//, ''), info, address: attributes },
      file,
      [],
    );
    return { attributes };
  }

  /** Loads the dump into `target`, the services in `stop` stopped meanwhile. */
  private async load(
    request: BackupRequest,
    target: Awaited<ReturnType<DockerDependencyBackups['target']>>,
    file: string,
    stop: ServiceRef[],
  ): Promise<void> {
    const stopped = await this.stopServices(stop);
    try {
      const load = target.tool.load;
      if (load) {
        await this.expectSuccess(
          'the restore',
          await this.runHelper(request.environment, target.runName, target.info.Config.Image, {
            cmd: load(target.address),
            env: target.env,
            stdin: file,
          }),
        );
      } else {
        await this.loadRedis(request, target.info, file);
      }
    } finally {
      await this.startContainers(stopped);
    }
  }

  async discard(_environment: EnvironmentRef, location: string): Promise<void> {
    await rm(this.pathOf(location), { force: true });
  }

  /** A location is relative to the backup target, and must stay in it. */
  private pathOf(location: string): string {
    const file = path.resolve(this.backupDir, location);
    if (!file.startsWith(`${path.resolve(this.backupDir)}${path.sep}`)) {
      throw new TerminalError(`the backup location ${location} is outside the backup target`);
    }
    return file;
  }

  /** The dependency's running container, its tool, address and the client's variables. */
  private async target(request: BackupRequest) {
    const { engine, name, runName } = dependencyOf(request.service, request.resource, 'docker');
    const tool = TOOLS[engine.name];
    if (!tool) throw new TerminalError(`${engine.name} dependencies have no backups on the docker provider`);
    const info = await this.docker
      .getContainer(runName)
      .inspect()
      .catch((error: unknown) => {
        if (isGone(error)) throw new TerminalError(`the dependency's container ${runName} is gone`);
        throw error;
      });
    const address = attributesOf(request.environment, request.resource, name, engine);
    const password = engine.passwordVariable
      ? info.Config.Env?.find((e) => e.startsWith(`${engine.passwordVariable}=`))?.slice(
          engine.passwordVariable.length + 1,
        )
      : undefined;
    const env = tool.passwordVariable && password ? [`${tool.passwordVariable}=${password}`] : [];
    return { tool, engine, name, runName, info, address, env, password: password ?? '' };
  }

  private async expectSuccess(what: string, run: { code: number; stderr: string }): Promise<void> {
    if (run.code !== 0) {
      throw new TerminalError(`${what} failed (exit code ${run.code}): ${lastLines(run.stderr)}`);
    }
  }

  /**
   * Runs a helper container on the environment's network to its end: `stdin` is streamed into it,
   * its stdout into `stdout` (else kept for the reason), its stderr kept for a failure's reason.
   */
  private async runHelper(
    environment: EnvironmentRef,
    dependency: string,
    image: string,
    options: {
      cmd: string[];
      env: string[];
      stdin?: string;
      stdout?: Writable;
      mounts?: Docker.MountSettings[];
    },
  ): Promise<{ code: number; stderr: string }> {
    const labels = {
      [LABEL.managed]: 'true',
      [LABEL.environment]: environment.id,
      [LABEL.role]: 'backup',
      [LABEL.backupOf]: dependency,
    };
    // A helper an earlier attempt left (its process was killed) is no attempt's any more: the job
    // queue runs the dependency's backups and restores one at a time.
    for (const stale of await this.docker.listContainers({ all: true, filters: labelFilter(labels) })) {
      await this.docker
        .getContainer(stale.Id)
        .remove({ force: true })
        .catch((error: unknown) => {
          if (!isGone(error)) throw error;
        });
    }
    const container = await this.docker
      .createContainer({
        Image: image,
        Cmd: options.cmd,
        Env: options.env,
        Labels: labels,
        OpenStdin: options.stdin !== undefined,
        StdinOnce: options.stdin !== undefined,
        AttachStdin: options.stdin !== undefined,
        HostConfig: {
          NetworkMode: networkName(environment.id),
          ...(options.mounts ? { Mounts: options.mounts } : {}),
        },
      })
      .catch((error: unknown) => {
        throw engineError(error, 'the Docker Engine refused the backup container');
      });
    try {
      const stream = (await container.attach({
        stream: true,
        hijack: options.stdin !== undefined,
        stdin: options.stdin !== undefined,
        stdout: true,
        stderr: true,
      })) as NodeJS.ReadWriteStream;
      const stdout = options.stdout ?? new PassThrough().resume();
      const stderr = new PassThrough();
      let errorText = '';
      stderr.on('data', (chunk: Buffer) => {
        errorText = (errorText + chunk.toString('utf8')).slice(-4000);
      });
      const ended = once(stream, 'end');
      container.modem.demuxStream(stream, stdout, stderr);
      await container.start();
      if (options.stdin !== undefined) {
        await pipeline(createReadStream(options.stdin), stream as unknown as Writable, { end: true });
      }
      const [{ StatusCode }] = (await Promise.all([container.wait(), ended])) as [
        { StatusCode: number },
        unknown,
      ];
      if (options.stdout) options.stdout.end();
      return { code: StatusCode, stderr: errorText };
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  }

  /** Redis: its container stops, a helper loads the dump into its volume, and it starts again. */
  private async loadRedis(request: BackupRequest, info: Docker.ContainerInspectInfo, file: string) {
    const container = this.docker.getContainer(info.Id);
    await container.stop().catch((error: unknown) => {
      if ((error as { statusCode?: number }).statusCode !== 304) throw error;
    });
    try {
      const volume = info.Mounts.find((m) => m.Destination === '/data')?.Name;
      if (!volume) throw new TerminalError(`${info.Name} has no data volume`);
      await this.expectSuccess(
        'loading the redis dump',
        await this.runHelper(request.environment, info.Name.replace(/^\//, ''), info.Config.Image, {
          cmd: REDIS_LOAD,
          env: [],
          stdin: file,
          mounts: [{ Type: 'volume', Source: volume, Target: '/data' }],
        }),
      );
    } finally {
      await container.start().catch((error: unknown) => {
        if ((error as { statusCode?: number }).statusCode !== 304) throw error;
      });
    }
  }

  /** Stops the replicas of the services using the dependency; returns them, to start again after. */
  private async stopServices(services: ServiceRef[]): Promise<Docker.Container[]> {
    const stopped: Docker.Container[] = [];
    for (const service of services) {
      const replicas = await this.docker.listContainers({
        all: true,
        filters: labelFilter({ [LABEL.service]: service.id, [LABEL.role]: 'replica' }),
      });
      for (const replica of replicas) {
        const container = this.docker.getContainer(replica.Id);
        // A retry after a crash finds them stopped already: they are started again after all the same.
        await container.stop().catch((error: unknown) => {
          if ((error as { statusCode?: number }).statusCode !== 304) throw error;
        });
        stopped.push(container);
      }
    }
    return stopped;
  }

  private async startContainers(containers: Docker.Container[]): Promise<void> {
    for (const container of containers) {
      await container.start().catch((error: unknown) => {
        if ((error as { statusCode?: number }).statusCode !== 304) throw error;
      });
    }
  }
}

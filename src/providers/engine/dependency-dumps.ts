/**
 * What the Engine-API drivers (docker, swarm) share for ops.json dependency backups: each dump runs in
 * a helper container of its own, from the dependency's own image (it carries the engine's client tools:
 * pg_dump, mariadb-dump, redis-cli), on the environment's network, reaching the dependency by its
 * address as a service would; its output streams through the Engine API into a file under the backup
 * target on Berth's machine, written under a temporary name and renamed once complete and synced. So
 * Berth's process needs no access to the Engine's file system, nor to the node that holds the
 * dependency's volume, and nothing runs inside the dependency's own container. A restore streams the
 * file into the engine's client the same way; each driver loads redis (which reads a dump only at
 * start) its own way, and stops the services using the dependency its own way.
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

/** What a dump of each engine is, how it is made and read back. */
export interface DumpTool {
  extension: string;
  /** The command printing the dump on stdout. */
  dump: (address: Record<string, string>) => string[];
  /** The command reading the dump on stdin into the running dependency; none: loaded at start (redis). */
  load?: (address: Record<string, string>) => string[];
  /** The variable the client reads the password from. */
  passwordVariable?: string;
}

export const TOOLS: Partial<Record<Engine['name'], DumpTool>> = {
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

/** A dependency as a backup or restore reaches it. */
export interface DumpTarget {
  tool: DumpTool;
  engine: Engine;
  /** Its name (its address on the environment's network). */
  name: string;
  /** Its container's (docker) or swarm service's name. */
  runName: string;
  /** The image it runs: the helpers run from it too. */
  image: string;
  /** Its attributes: address, user, database. */
  address: Record<string, string>;
  /** The client's variables (its password). */
  env: string[];
  password: string;
}

export const isGone = (error: unknown) => (error as { statusCode?: number }).statusCode === 404;

/** The last output of a helper, for a failure reason (a password never reaches it: it is a variable). */
const lastLines = (text: string) => text.trim().split('\n').slice(-5).join(' ').slice(-800);

/** The client's variables for a dependency with this password. */
export const clientEnv = (tool: DumpTool, password: string | undefined) =>
  tool.passwordVariable && password ? [`${tool.passwordVariable}=${password}`] : [];

/** A copy of a dependency to make: under `name`, with the original's password. */
export interface CopyRequest {
  request: BackupRequest;
  name: string;
  password: string;
}

export abstract class EngineDependencyBackups implements DependencyBackups {
  protected readonly docker: Docker;
  private readonly backupDir: string;

  constructor(docker: Docker, backupDir: string) {
    this.docker = docker;
    this.backupDir = backupDir;
  }

  /** The driver whose dependencies these are (their names and the messages say it). */
  protected abstract readonly driver: 'docker' | 'swarm';
  /** What the dependency runs as `runName`: its image, and its password when it has one. */
  protected abstract runOf(
    request: BackupRequest,
    runName: string,
    engine: Engine,
  ): Promise<{ image: string; password: string | undefined }>;
  /**
   * A copy of the dependency made anew and empty under `name` with the original's password, running, to
   * restore into for inspection: its container's or service's name and its image.
   */
  protected abstract makeCopy(
    copy: CopyRequest,
    signal: AbortSignal,
  ): Promise<{ runName: string; image: string }>;
  /** Loads the redis dump `file` into the dependency; `signal` aborts when this attempt lost its job. */
  protected abstract loadRedis(
    request: BackupRequest,
    target: DumpTarget,
    file: string,
    signal: AbortSignal,
  ): Promise<void>;
  /**
   * Stops the workloads of `services`; resolves with what starts them again. `signal` aborts when this
   * attempt lost its job: the waiting ends, the attempt that holds the job now does the restore.
   */
  protected abstract stopServices(services: ServiceRef[], signal: AbortSignal): Promise<() => Promise<void>>;
  abstract release(environment: EnvironmentRef, services: ServiceRef[]): Promise<void>;
  /** Makes `image` present on the Engine that runs the helpers. */
  protected abstract ensureImage(image: string): Promise<void>;

  /** The dependency's running container or service, its tool, address and the client's variables. */
  private async target(request: BackupRequest): Promise<DumpTarget> {
    const { engine, name, runName } = dependencyOf(request.service, request.resource, this.driver);
    const tool = TOOLS[engine.name];
    if (!tool) {
      throw new TerminalError(`${engine.name} dependencies have no backups on the ${this.driver} provider`);
    }
    const { image, password } = await this.runOf(request, runName, engine);
    return {
      tool,
      engine,
      name,
      runName,
      image,
      address: attributesOf(request.environment, request.resource, name, engine),
      env: clientEnv(tool, password),
      password: password ?? '',
    };
  }

  private async copyOf(
    request: BackupRequest,
    original: DumpTarget,
    name: string,
    signal: AbortSignal,
  ): Promise<DumpTarget> {
    const made = await this.makeCopy({ request, name, password: original.password }, signal);
    return {
      ...original,
      name,
      ...made,
      address: attributesOf(request.environment, request.resource, name, original.engine),
    };
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
    const run = await this.runHelper(request.environment, target.runName, target.image, {
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
      await this.load(request, original, file, request.stop, signal);
      return {};
    }
    // A copy for inspection: the same engine, image and password, under a name of its own.
    const copy = await this.copyOf(request, original, copyNameOf(original.name), signal);
    await this.load(request, copy, file, [], signal);
    return { attributes: copy.address };
  }

  async discard(_environment: EnvironmentRef, location: string): Promise<void> {
    await rm(this.pathOf(location), { force: true });
  }

  /** Loads the dump into `target`, the services in `stop` stopped meanwhile. */
  private async load(
    request: BackupRequest,
    target: DumpTarget,
    file: string,
    stop: ServiceRef[],
    signal: AbortSignal,
  ) {
    const restart = await this.stopServices(stop, signal);
    try {
      const load = target.tool.load;
      if (load) {
        await this.expectSuccess(
          'the restore',
          await this.runHelper(request.environment, target.runName, target.image, {
            cmd: load(target.address),
            env: target.env,
            stdin: file,
          }),
        );
      } else {
        await this.loadRedis(request, target, file, signal);
      }
    } finally {
      await restart();
    }
  }

  /** A location is relative to the backup target, and must stay in it. */
  private pathOf(location: string): string {
    const file = path.resolve(this.backupDir, location);
    if (!file.startsWith(`${path.resolve(this.backupDir)}${path.sep}`)) {
      throw new TerminalError(`the backup location ${location} is outside the backup target`);
    }
    return file;
  }

  protected async expectSuccess(what: string, run: { code: number; stderr: string }): Promise<void> {
    if (run.code !== 0) {
      throw new TerminalError(`${what} failed (exit code ${run.code}): ${lastLines(run.stderr)}`);
    }
  }

  /**
   * Runs a helper container on the environment's network to its end: `stdin` is streamed into it,
   * its stdout into `stdout` (else kept for the reason), its stderr kept for a failure's reason.
   */
  protected async runHelper(
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
    await this.ensureImage(image);
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
          // The environment's network: a bridge on docker, an attachable overlay on the swarm.
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
}

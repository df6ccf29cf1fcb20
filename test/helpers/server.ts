import { after, before } from 'node:test';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { buildBaseImage, freePort, removeEnvironment, requireDocker } from './docker.ts';
import { type BerthProcess, firstStartOf, listening, runBerth, serveEnv } from './process.ts';

type Provider = 'sim' | 'docker' | 'swarm';
type Settings = Record<string, string | undefined>;
type RunOptions = Parameters<typeof runBerth>[2];

/** How a fixture's database is made: `database` forces one kind (a test of the embedded data dir's own lock). */
export interface FixtureOptions {
  database?: 'embedded' | 'postgres';
}

/**
 * What a server that a test kills runs with: a killed process's leases lapse within seconds; no rate
 * limit. Not shorter: a worker gives its job up when a renewal is not confirmed within 4/5 of a lease,
 * and at load 12-25 renewals of 1.5 s leases came late, the jobs retried with a growing backoff (a
 * restarted server's deployment then waited past its test's deadline) and lost calls overlapped retries.
 */
export const KILLED_SERVER = { BERTH_JOB_LEASE_MS: '5000', BERTH_RATE_LIMIT_PER_MIN: '100000' };

/** A first start's outcome: the API token and the environment, available. */
export interface FirstStart {
  token: string;
  envId: string;
  envUrl: string;
}

/** A `berth serve` of a test file's own, its first start done: the token and an available environment. */
export interface TestServer extends FirstStart {
  berth: BerthProcess & { url: string };
  database: TestDatabase;
  /** Stops the server, removes what the runtime made for the environment, drops the database. */
  close(): Promise<void>;
}

/**
 * Berth on a database of its own, started as often as a test needs (a restart keeps the database):
 * `settings` are what every start gets (the database, the provider, a docker ingress port), `close`
 * stops what still runs, removes what the runtime made for the environments it saw and drops the database.
 */
export class Servers {
  readonly provider: Provider;
  readonly database: TestDatabase;
  readonly settings: Settings;
  private readonly processes: BerthProcess[] = [];
  private readonly envIds = new Set<string>();

  static async open(provider: Provider, settings: Settings, options: FixtureOptions = {}): Promise<Servers> {
    if (provider !== 'sim') await requireDocker();
    if (provider === 'docker') await buildBaseImage();
    const database = await createTestDatabase(options.database);
    return new Servers(provider, database, {
      BERTH_DATA_DIR: database.dataDir,
      BERTH_DATABASE_URL: database.databaseUrl ?? '',
      BERTH_PROVIDER: provider,
      ...(provider !== 'sim' ? { BERTH_INGRESS_PORT: String(await freePort()) } : {}),
      ...settings,
    });
  }

  private constructor(provider: Provider, database: TestDatabase, settings: Settings) {
    this.provider = provider;
    this.database = database;
    this.settings = settings;
  }

  env(extra: Settings = {}): Settings {
    return { ...this.settings, ...extra };
  }

  /** The docker ingress's port. */
  get ingressPort(): number {
    return Number(this.settings.BERTH_INGRESS_PORT);
  }

  /** A process of this database's (from runBerth or startBerth), stopped by close if it still runs. */
  track<P extends BerthProcess>(process: P): P {
    this.processes.push(process);
    return process;
  }

  /** `berth serve` with env(extra), once it listens. */
  async serve(extra: Settings = {}): Promise<BerthProcess & { url: string }> {
    return listening(this.track(runBerth(['serve'], serveEnv(this.env(extra)))));
  }

  /**
   * `berth <args>` with env(extra), not waited for: a command, a worker, or a serve that must refuse to
   * start or be watched from its first line.
   */
  run(args: string[], extra: Settings = {}, options?: RunOptions): BerthProcess {
    return this.track(runBerth(args, this.env(extra), options));
  }

  /** The first start's token and environment, whose containers close removes. */
  async firstStart(berth: BerthProcess & { url: string }): Promise<FirstStart> {
    const first = await firstStartOf(berth);
    this.envIds.add(first.envId);
    return first;
  }

  async start(extra: Settings = {}): Promise<FirstStart & { berth: BerthProcess & { url: string } }> {
    const berth = await this.serve(extra);
    return { berth, ...(await this.firstStart(berth)) };
  }

  /** An environment made otherwise than by a first start (by the API), whose containers close removes. */
  own(envId: string): void {
    this.envIds.add(envId);
  }

  async close(): Promise<void> {
    for (const process of this.processes) {
      // A process a test stopped (SIGSTOP) and left so would never take the SIGTERM.
      if (process.child.exitCode === null && process.child.signalCode === null) process.child.kill('SIGCONT');
      await process.kill('SIGTERM');
    }
    // A swarm's services go with the swarm, which its test takes down.
    if (this.provider === 'docker') for (const envId of this.envIds) await removeEnvironment(envId);
    await this.database.drop();
  }
}

/**
 * The set-up process and docker tests share: a fresh database, `berth serve` on it with `provider`
 * (docker: the engine checked, the base image built, an ingress on a free port), and its first start.
 * `env` adds or overrides settings.
 */
export async function startTestServer(provider: Provider, env: Settings = {}): Promise<TestServer> {
  const servers = await Servers.open(provider, env);
  try {
    const started = await servers.start();
    return { ...started, database: servers.database, close: () => servers.close() };
  } catch (error) {
    await servers.close();
    throw error;
  }
}

/** A test file's Berth: see serverFixture. */
export interface ServerFixture {
  /**
   * Resolves once the set-up is done. Node runs a file's top-level `before` hooks as they are declared,
   * without waiting for one another: a file's own hook awaits this before it reads database or ingressPort.
   */
  ready(): Promise<void>;
  /** The file's database. */
  readonly database: TestDatabase;
  /** The docker ingress's port. */
  readonly ingressPort: number;
  /** The settings of `berth` on the file's database (with the provider's), then `extra`. */
  env(extra?: Settings): Settings;
  /** `berth serve` with env(extra), once it listens. */
  serve(extra?: Settings): Promise<BerthProcess & { url: string }>;
  /** serve, then its first start: the token and the environment, once available. */
  start(extra?: Settings): Promise<FirstStart & { berth: BerthProcess & { url: string } }>;
  /** The first start of a process the test ran itself (track it too). */
  firstStart(berth: BerthProcess & { url: string }): Promise<FirstStart>;
  /** A process the test ran itself with env(): stopped after the file's tests if it still runs. */
  track<P extends BerthProcess>(process: P): P;
  /** An environment the test made through the API: its containers are removed after the file's tests. */
  own(envId: string): void;
  /** `berth <args>` with env(extra), not waited for (a command, a worker, a serve that must refuse), tracked. */
  run(args: string[], extra?: Settings, options?: RunOptions): BerthProcess;
  /**
   * Another database of the file's with the same settings, then `extra` (a restore's target, a test that
   * needs a database to itself): its processes stopped and it dropped after the file's tests.
   */
  another(extra?: Settings): Promise<Servers>;
}

/**
 * The set-up of a file of process, docker or swarm tests, as hooks of the file: before its tests a
 * database of its own (docker: the engine checked, the base image built, an ingress port chosen; swarm:
 * the engine checked, an ingress port chosen, the swarm's DOCKER_HOST given at start); after them, every
 * process started through it stopped, what the runtime made for the environments it saw removed, and the
 * database dropped. `settings` (a function: read when a server starts) are every start's.
 */
export function serverFixture(
  provider: Provider,
  settings: Settings | (() => Settings) = {},
  options: FixtureOptions = {},
): ServerFixture {
  let servers: Servers | undefined;
  let opening: Promise<Servers> | undefined;
  const others: Servers[] = [];
  const open = async () => {
    opening ??= Servers.open(provider, {}, options);
    servers = await opening;
    return servers;
  };
  const opened = () => {
    if (!servers) throw new Error('the server fixture is used before it is ready (await ready())');
    return servers;
  };
  const shared = () => (typeof settings === 'function' ? settings() : settings);
  before(async () => {
    await open();
  });
  after(async () => {
    for (const other of others) await other.close();
    if (opening) await (await opening).close();
  });
  return {
    ready: async () => {
      await open();
    },
    get database() {
      return opened().database;
    },
    get ingressPort() {
      return opened().ingressPort;
    },
    env: (extra = {}) => opened().env({ ...shared(), ...extra }),
    serve: async (extra = {}) => (await open()).serve({ ...shared(), ...extra }),
    start: async (extra = {}) => (await open()).start({ ...shared(), ...extra }),
    firstStart: async (berth) => (await open()).firstStart(berth),
    track: (process) => opened().track(process),
    own: (envId) => opened().own(envId),
    run: (args, extra = {}, runOptions) => opened().run(args, { ...shared(), ...extra }, runOptions),
    another: async (extra = {}) => {
      const other = await Servers.open(provider, { ...shared(), ...extra }, options);
      others.push(other);
      return other;
    },
  };
}

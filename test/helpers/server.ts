import { after, before } from 'node:test';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { buildBaseImage, freePort, removeEnvironment, requireDocker } from './docker.ts';
import { type BerthProcess, firstStartOf, startBerth } from './process.ts';

type Provider = 'sim' | 'docker' | 'swarm';
type Settings = Record<string, string | undefined>;

/** What a server that a test kills runs with: a killed process's leases lapse fast; no rate limit. */
export const KILLED_SERVER = { BERTH_JOB_LEASE_MS: '1500', BERTH_RATE_LIMIT_PER_MIN: '100000' };

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
class Servers {
  readonly provider: Provider;
  readonly database: TestDatabase;
  readonly settings: Settings;
  private readonly processes: BerthProcess[] = [];
  private readonly envIds = new Set<string>();

  static async open(provider: Provider, settings: Settings): Promise<Servers> {
    if (provider !== 'sim') await requireDocker();
    if (provider === 'docker') await buildBaseImage();
    const database = await createTestDatabase();
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

  /** A process of this database's (from runBerth or startBerth), stopped by close if it still runs. */
  track<P extends BerthProcess>(process: P): P {
    this.processes.push(process);
    return process;
  }

  async serve(extra: Settings = {}): Promise<BerthProcess & { url: string }> {
    return this.track(await startBerth(this.env(extra)));
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
    for (const process of this.processes) await process.kill('SIGTERM');
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
}

/**
 * The set-up of a file of process, docker or swarm tests, as hooks of the file: before its tests a
 * database of its own (docker: the engine checked, the base image built, an ingress port chosen; swarm:
 * the engine checked, an ingress port chosen, the swarm's DOCKER_HOST given at start); after them, every
 * process started through it stopped, what the runtime made for the environments it saw removed, and the
 * database dropped. `settings` (a function: read when a server starts) are every start's.
 */
export function serverFixture(provider: Provider, settings: Settings | (() => Settings) = {}): ServerFixture {
  let servers: Servers | undefined;
  let opening: Promise<Servers> | undefined;
  const open = async () => {
    opening ??= Servers.open(provider, {});
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
      return Number(opened().settings.BERTH_INGRESS_PORT);
    },
    env: (extra = {}) => opened().env({ ...shared(), ...extra }),
    serve: async (extra = {}) => (await open()).serve({ ...shared(), ...extra }),
    start: async (extra = {}) => (await open()).start({ ...shared(), ...extra }),
    firstStart: async (berth) => (await open()).firstStart(berth),
    track: (process) => opened().track(process),
    own: (envId) => opened().own(envId),
  };
}

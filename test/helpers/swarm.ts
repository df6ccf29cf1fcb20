import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import pino, { type Logger } from 'pino';
import { loadConfig } from '../../src/config.ts';
import { DEFAULT_OPS_CONFIG, type OpsConfig } from '../../src/domain/ops-json.ts';
import { demultiplex } from '../../src/providers/engine/output.ts';
import type { DesiredService, EnvironmentRef, Provider, RuntimeSpec } from '../../src/providers/provider.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import type { TestDatabase } from './database.ts';
import { freePort, docker as hostDocker, type Registry, startRegistry } from './docker.ts';
import { pollUntil } from './poll.ts';
import { serviceSpecIn } from './provider-contract.ts';
import { Servers } from './server.ts';

/**
 * A real swarm on this machine for the swarm-provider suites: Docker Engines in their own network
 * namespaces on a bridge (swarm-net.sh), node 1 the manager, and a registry on the bridge that every
 * node pulls from. One per test file, on a slot of its own (its bridge, namespaces, paths: swarm-net.sh).
 */
const execFileAsync = promisify(execFile);
const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'swarm-net.sh');
const LOCKS = '/run/berth-swarm-test';
const SLOTS = 100;

/**
 * Holds the flock of `file` for the rest of this process's life, through a child `flock` that keeps it
 * until its stdin closes, as it does when this process exits, however it exits. False at once when
 * another holds it and `wait` is off.
 */
function holdLock(file: string, wait: boolean): Promise<boolean> {
  const child = spawn('flock', [...(wait ? [] : ['-n']), file, '-c', 'echo held; exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', () => resolve(false));
    child.stdout.once('data', () => {
      child.removeAllListeners('exit');
      child.stdout.destroy();
      // Neither the child nor its stdin keeps this process alive: its exit is what frees the lock.
      (child.stdin as unknown as { unref(): void }).unref();
      child.unref();
      resolve(true);
    });
  });
}

/**
 * This process's swarm slot (0-99: swarm-net.sh's names), locked so that runs side by side (two
 * checkouts, or test files run concurrently) never take down each other's swarm: a run takes the first
 * free slot rather than wait for a busy one, so CI (one file at a time) always gets slot 0. A slot set by
 * BERTH_SWARM_SLOT (a bench pins one) is waited for.
 */
let held: Promise<string> | undefined;
export function swarmSlot(): Promise<string> {
  held ??= (async () => {
    fs.mkdirSync(LOCKS, { recursive: true });
    const pinned = process.env.BERTH_SWARM_SLOT;
    if (pinned !== undefined) {
      if (!/^[0-9]{1,2}$/.test(pinned))
        throw new Error(`BERTH_SWARM_SLOT must be a number from 0 to 99, not '${pinned}'`);
      const lock = `${LOCKS}/s${pinned}.lock`;
      if (!(await holdLock(lock, false))) {
        console.error(
          `swarm slot ${pinned} (BERTH_SWARM_SLOT) is in use by another run: waiting for ${lock}`,
        );
        await holdLock(lock, true);
      }
      return pinned;
    }
    for (let n = 0; n < SLOTS; n++) if (await holdLock(`${LOCKS}/s${n}.lock`, false)) return String(n);
    throw new Error(`every test swarm slot (0-${SLOTS - 1}) is in use: see ${LOCKS}/*.lock`);
  })();
  return held;
}

export const SWARM_IMAGE = 'berth-swarm/busybox';

export interface TestSwarm {
  /** DOCKER_HOST of the manager. */
  dockerHost: string;
  /** DOCKER_HOST of node n's engine (a manager too once promoted). */
  dockerHostOf(n: number): string;
  manager: Docker;
  /** The nodes' data roots are directories under this one (what a node keeps on disk). */
  dataRoot: string;
  /** The registry every node reaches, `host:port`. */
  registry: string;
  /** A node's own engine (1 is the manager). */
  node(n: number): Docker;
  stopNode(n: number): Promise<void>;
  startNode(n: number): Promise<void>;
  /** Builds an image on the manager from a Dockerfile (the static busybox beside it) and pushes it. */
  pushImage(name: string, dockerfile: string): Promise<string>;
  /** Pushes an image of this machine's engine to the swarm's registry as `name:latest`; its reference there. */
  pushLocalImage(image: string, name: string): Promise<string>;
  down(): Promise<void>;
}

function engine(runDir: string, n: number): Docker {
  return new Docker({ socketPath: `${runDir}/${n}.sock` });
}

async function follow(docker: Docker, stream: NodeJS.ReadableStream): Promise<void> {
  const output = await new Promise<{ error?: string }[]>((resolve, reject) =>
    docker.modem.followProgress(stream, (error, result) => (error ? reject(error) : resolve(result))),
  );
  const failed = output.find((line) => line.error);
  if (failed) throw new Error(failed.error);
}

export async function startSwarm(nodes: number): Promise<TestSwarm> {
  const slot = await swarmSlot();
  const bridgeAddress = `10.78.${slot}.1`;
  const runDir = `/run/berth-swarm-test/s${slot}`;
  const run = (...args: string[]) =>
    execFileAsync('bash', [SCRIPT, ...args], { env: { ...process.env, BERTH_SWARM_SLOT: slot } });
  const port = await freePort();
  const registryAddress = `${bridgeAddress}:${port}`;
  await run('up', String(nodes), registryAddress);
  let registry: Registry | undefined;
  const manager = engine(runDir, 1);
  const down = async () => {
    await registry?.stop();
    await run('down', String(nodes));
  };
  try {
    registry = await startRegistry(bridgeAddress, port);
    await pollUntil('every node to be ready', async () => {
      const listed = await manager.listNodes();
      return listed.length === nodes &&
        listed.every((n: { Status?: { State?: string } }) => n.Status?.State === 'ready')
        ? true
        : undefined;
    });
  } catch (error) {
    await down();
    throw error;
  }
  const pushImage = async (name: string, dockerfile: string) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-swarm-image-'));
    const reference = `${registryAddress}/${name}:latest`;
    try {
      fs.copyFileSync('/bin/busybox', path.join(dir, 'busybox'));
      fs.writeFileSync(path.join(dir, 'Dockerfile'), dockerfile);
      await follow(
        manager,
        await manager.buildImage(
          { context: dir, src: ['Dockerfile', 'busybox'] },
          { t: reference, rm: true },
        ),
      );
      await follow(manager, await manager.getImage(reference).push({ authconfig: {} }));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    return reference;
  };
  // This machine's engine pushes over plain HTTP only to registries on a loopback address: a second
  // registry there, over the same storage, takes the push, and the nodes pull the image from theirs.
  const pushLocalImage = async (image: string, name: string) => {
    const loopback = await startRegistry('127.0.0.1', undefined, (registry as Registry).storage);
    const via = `${loopback.address}/${name}`;
    try {
      await hostDocker.getImage(image).tag({ repo: via, tag: 'latest' });
      await follow(hostDocker, await hostDocker.getImage(`${via}:latest`).push({ authconfig: {} }));
    } finally {
      await hostDocker
        .getImage(`${via}:latest`)
        .remove({ noprune: true })
        .catch(() => undefined);
      await loopback.stop();
    }
    return `${registryAddress}/${name}:latest`;
  };
  await pushImage(
    SWARM_IMAGE,
    'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nCMD ["/bin/sh"]\n',
  );
  return {
    dockerHost: `unix://${runDir}/1.sock`,
    dockerHostOf: (n) => `unix://${runDir}/${n}.sock`,
    manager,
    dataRoot: `/var/lib/berth-swarm-test/s${slot}`,
    registry: registryAddress,
    node: (n) => engine(runDir, n),
    stopNode: async (n) => {
      await run('stop-node', String(n));
    },
    startNode: async (n) => {
      await run('start-node', String(n), registryAddress);
    },
    pushImage,
    pushLocalImage,
    down,
  };
}

/** What every task of a swarm service printed so far. */
export async function serviceOutput(manager: Docker, name: string): Promise<string> {
  const buffer = (await manager
    .getService(name)
    .logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
  return demultiplex(buffer);
}

export interface SwarmBerth {
  provider: Provider;
  store: Store;
  database: TestDatabase;
  /** The ingress's port: the shared set-up's, unless `providerEnv` gave one. */
  ingressPort: number;
  /** Closes the provider and the store, and drops the database. */
  close(): Promise<void>;
}

/**
 * Berth's swarm driver in this process, as the suites open it (`providerEnv`: its settings), on the
 * shared set-up's pieces (test/helpers/server.ts): a database of its own and an ingress port.
 */
export async function openSwarmProvider(
  providerEnv: Record<string, string>,
  logger: Logger = pino({ level: 'silent' }),
): Promise<SwarmBerth> {
  const servers = await Servers.open('swarm', {});
  const { database } = servers;
  const env = { BERTH_INGRESS_PORT: String(servers.ingressPort), ...providerEnv };
  const store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
  const config = { ...loadConfig({}), provider: 'swarm', providerEnv: env };
  const provider = await openProvider(config, store.db, logger);
  return {
    provider,
    store,
    database,
    ingressPort: Number(env.BERTH_INGRESS_PORT),
    close: async () => {
      await provider.close();
      await store.close();
      await servers.close();
    },
  };
}

export interface SwarmSuite {
  swarm: TestSwarm;
  berth: SwarmBerth;
  provider: Provider;
  /** The environment the suite's services are deployed in, made by the driver. */
  environment: EnvironmentRef;
  /** Closes the driver, then takes the swarm down. */
  close(): Promise<void>;
}

/**
 * The set-up of an in-process swarm suite: a swarm of `nodes`, Berth's driver on it and an environment.
 * `providerEnv` readies the swarm for the suite (images to push, nodes to promote) and returns the
 * driver's settings, over the manager's engine and a monitor of 1 s; `serving` starts the driver's
 * serving side (its ingress) before the environment is made. What it started is stopped if a step fails.
 */
export async function openSwarmSuite(
  nodes: number,
  providerEnv: (swarm: TestSwarm) => Promise<Record<string, string>> | Record<string, string>,
  { serving = false }: { serving?: boolean } = {},
): Promise<SwarmSuite> {
  const swarm = await startSwarm(nodes);
  let berth: SwarmBerth | undefined;
  try {
    berth = await openSwarmProvider({
      DOCKER_HOST: swarm.dockerHost,
      BERTH_SWARM_MONITOR_S: '1',
      ...(await providerEnv(swarm)),
    });
    const { provider } = berth;
    if (serving) await provider.serving?.start();
    const environment = {
      id: randomUUID(),
      account_id: randomUUID(),
      cloud: 'aws' as const,
      region: 'local',
    };
    await provider.ensureEnvironment(environment);
    const opened = berth;
    return {
      swarm,
      berth,
      provider,
      environment,
      close: async () => {
        await opened.close();
        await swarm.down();
      },
    };
  } catch (error) {
    await berth?.close();
    await swarm.down();
    throw error;
  }
}

/**
 * A new deployment (a fresh id) of `image`, a reference as pushImage returns it
 * (`registry/name:latest`), with a deploy_timeout of 2 minutes unless `ops` says otherwise.
 */
export function deploymentOf(
  environment: EnvironmentRef,
  serviceId: string,
  image: string,
  options: {
    generation: number;
    spec?: Partial<RuntimeSpec>;
    variables?: Record<string, string>;
    ops?: Partial<OpsConfig>;
  },
): DesiredService {
  const registry = image.slice(0, image.indexOf('/'));
  return {
    service: serviceSpecIn(environment, serviceId, {
      docker_registry: registry,
      docker_image: image.slice(registry.length + 1).replace(/:latest$/, ''),
      ...options.spec,
    }),
    environment,
    deploymentId: randomUUID(),
    generation: options.generation,
    target: { commit_id: '', docker_image_tag: 'latest', helm_chart_version: '' },
    ops: { ...DEFAULT_OPS_CONFIG, deploy_timeout: 2, ...options.ops },
    variables: options.variables ?? {},
    domains: [],
  };
}

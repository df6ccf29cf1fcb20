/**
 * The push-to-live rows of `npm run bench` (issue 32): how long a new version takes to serve on the
 * docker provider, against the Docker Engine's own time for the same image in the same round.
 *
 * - push: Berth from `POST .../deploy` of a new tag until its ingress serves that version, against
 *   `docker run` of the same image until its own published port answers 200.
 * - rollback: `POST .../rollback` until the ingress serves the previous version again, against
 *   `docker run` of that image.
 *
 * The images are busybox httpd (one static busybox, as the docker suites build it), one tag per
 * version, pushed to a local registry (Debian's docker-registry) and present on the engine, as a
 * ready image is: both sides start from the same state. Each round's Berth deployment records its
 * timeline (GET .../operations): the row keeps the median of each moment, so a slow row shows where
 * its time went. BENCH_PUSH_ROUNDS (5) rounds; run alone with `node bench/push-to-live.ts`.
 * @module
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { median } from './median.ts';
import { type AddRow, BERTH_BIN, log, spawnNode, waitFor } from './process.ts';

const exec = promisify(execFile);

const ROUNDS = Number(process.env.BENCH_PUSH_ROUNDS || 5);
/** Berth may take this much of the engine's own time. */
const TARGET_RATIO = 1.2;
const IMAGE = 'berth-bench/web';
/**
 * BENCH_PUSH_SANDBOX=0: the docker rows with network sandboxes off (BERTH_DOCKER_SANDBOXES=off: each
 * replica's network made as it starts); by default they are on, with Berth's own pause image.
 */
const SANDBOXES = process.env.BENCH_PUSH_SANDBOX !== '0';

const cleanups: Array<() => Promise<void>> = [];

/** An answer's envelope. */
interface Reply {
  // biome-ignore lint/suspicious/noExplicitAny: the bench reads a few fields of several JSON shapes
  data: any;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls every 2 ms (the bench times these waits); a check that throws (nothing answers yet) is retried. */
function settle<T>(what: string, check: () => Promise<T | undefined>, ms = 120_000): Promise<T> {
  return waitFor(what, () => check().catch(() => undefined), ms, 2);
}

/** One GET with a chosen Host header: its status and body, or undefined when nothing answered. */
function get(
  port: number,
  host: string,
  address = '127.0.0.1',
): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const req = http.get({ host: address, port, path: '/', headers: { host }, timeout: 2000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

const docker = (...args: string[]) => exec('docker', args, { maxBuffer: 16 * 1024 * 1024 });

async function startRegistry(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-registry-'));
  const address = `127.0.0.1:${await freePort()}`;
  const config = path.join(dir, 'config.yml');
  fs.writeFileSync(
    config,
    `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\nhttp:\n  addr: ${address}\n`,
  );
  const child = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
  cleanups.push(async () => {
    child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await settle('the registry', async () => ((await fetch(`http://${address}/v2/`)).ok ? true : undefined));
  return address;
}

/** One tag per version: httpd serving the version's name, stopping at once on SIGTERM. */
async function buildVersions(registry: string, count: number, engine = docker): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-image-'));
  try {
    fs.copyFileSync('/bin/busybox', path.join(dir, 'busybox'));
    fs.writeFileSync(
      path.join(dir, 'Dockerfile'),
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nARG VERSION\n' +
        'RUN mkdir /www && echo $VERSION > /www/index.html\n' +
        `CMD ["/bin/sh", "-c", "trap 'exit 0' TERM; httpd -f -p 8080 -h /www & wait"]\n`,
    );
    for (let v = 0; v < count; v++) {
      const tag = `${registry}/${IMAGE}:v${v}`;
      await engine('build', '-q', '--build-arg', `VERSION=v${v}`, '-t', tag, dir);
      await engine('push', '-q', tag);
      cleanups.push(async () => {
        await engine('rmi', '-f', tag).catch(() => undefined);
      });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `docker run` of the image until its published port answers 200: the engine's own push to live. On
 * `network`, a user-defined bridge as Berth's environments are (its embedded DNS set up in each
 * container): a figure beside the baseline, to tell the engine's share from Berth's.
 */
async function dockerRun(image: string, version: string, network?: string): Promise<number> {
  const port = await freePort();
  const name = `berth-bench-baseline-${port}`;
  const started = performance.now();
  await docker(
    'run',
    '-d',
    '--name',
    name,
    ...(network ? ['--network', network, '--network-alias', 'web'] : []),
    '-p',
    `127.0.0.1:${port}:8080`,
    image,
  );
  await settle(`docker run of ${image}`, async () => {
    const res = await get(port, 'localhost');
    return res?.status === 200 && res.body.trim() === version ? true : undefined;
  });
  const ms = performance.now() - started;
  await docker('rm', '-f', name);
  return ms;
}

interface Berth {
  child: ChildProcess;
  url: string;
  token: string;
  envId: string;
  ingressPort: number;
}

async function startBerth(registry: string, extra: Record<string, string> = {}): Promise<Berth> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-push-'));
  const ingressPort = await freePort();
  const proc = spawnNode([BERTH_BIN, 'serve'], {
    BERTH_DATA_DIR: dataDir,
    BERTH_PORT: '0',
    BERTH_PROVIDER: 'docker',
    BERTH_INGRESS_PORT: String(ingressPort),
    BERTH_ALLOWED_REGISTRIES: registry,
    BERTH_RATE_LIMIT_PER_MIN: '10000000',
    ...extra,
  });
  const { child } = proc;
  cleanups.push(async () => {
    await proc.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  // Not settle: a berth that exited fails the row at once.
  const found = (pattern: RegExp) =>
    waitFor(
      `berth: ${pattern}`,
      () => {
        if (child.exitCode !== null) throw new Error(`berth exited: ${proc.out()}`);
        return pattern.exec(proc.out())?.[1];
      },
      120_000,
      2,
    );
  const url = await found(/listening on (http:\/\/\S+)/);
  const token = await found(/API token:\s+([0-9a-f-]{36})/);
  const envId = await found(/environment:\s+([0-9a-f-]{36})/);
  const berth = { child, url, token, envId, ingressPort };
  await settle('the environment', async () =>
    (await call(berth, 'GET', `/v1/environments/${envId}`)).data.environment.state === 'available'
      ? true
      : undefined,
  );
  return berth;
}

async function call(berth: Pick<Berth, 'url' | 'token'>, method: string, route: string, body?: unknown) {
  const res = await fetch(`${berth.url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${berth.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Reply;
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** From the request until the ingress serves `version`; and the deployment's timeline. */
async function toLive(
  berth: Berth,
  host: string,
  version: string,
  request: () => Promise<Reply>,
  replaces = true,
): Promise<{ id: string; ms: number; timeline: Record<string, number> }> {
  const started = performance.now();
  const { data } = await request();
  await settle(`${version} through the ingress`, async () => {
    const res = await get(berth.ingressPort, host);
    return res?.status === 200 && res.body.trim() === version ? true : undefined;
  });
  const ms = performance.now() - started;
  const id = data.deployment_id as string;
  const deployment = await settle('the deployment to end', async () => {
    const d = (await call(berth, 'GET', `/v1/deployments/${id}`)).data.deployment;
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
  if (deployment.state !== 'success')
    throw new Error(`deployment ${id} failed: ${deployment.failure_reason}`);
  // The next measurement starts once the old version is gone, as `docker run`'s does after `docker rm`.
  const timeline = await settle('the old version to stop', async () => {
    const ops = await call(berth, 'GET', `/v1/deployments/${id}/operations`);
    const moments = ops.data.timeline as { mark: string; elapsed_ms: number }[];
    return !replaces || moments.some((m) => m.mark === 'old_stopped')
      ? Object.fromEntries(moments.map((m) => [m.mark, m.elapsed_ms]))
      : undefined;
  });
  return { id, ms, timeline };
}

/** The docker rows: push to live and rollback, each against `docker run` of the same image. */
export async function pushToLiveRows(addRow: AddRow): Promise<void> {
  try {
    log('push to live, docker: registry and images');
    const registry = await startRegistry();
    await buildVersions(registry, ROUNDS + 1);
    const network = `berth-bench-net-${process.pid}`;
    await docker('network', 'create', network);
    cleanups.push(async () => {
      await docker('network', 'rm', network).catch(() => undefined);
    });
    const berth = await startBerth(registry, SANDBOXES ? {} : { BERTH_DOCKER_SANDBOXES: 'off' });
    const { data } = await call(berth, 'POST', `/v1/environments/${berth.envId}/services`, {
      name: 'Push',
      source: 'docker_image',
      docker_registry: registry,
      docker_image: IMAGE,
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.25,
      memory_mb_min: 32,
    });
    const service = data.service as { id: string; subdomain: string };
    const host = `${service.subdomain}.localhost`;
    const servicePath = `/v1/environments/${berth.envId}/services/${service.id}`;
    const deploy = (tag: string) => () =>
      call(berth, 'POST', `${servicePath}/deploy`, { docker_image_tag: tag });
    // Each version's deployment: a rollback names the one it brings back.
    const deployed = new Map([['v0', (await toLive(berth, host, 'v0', deploy('v0'), false)).id]]);
    const push: Record<string, number>[] = [];
    const rollback: Record<string, number>[] = [];
    const moments = (timeline: Record<string, number>) =>
      Object.fromEntries(Object.entries(timeline).map(([mark, ms]) => [`berth_${mark}_ms`, ms]));
    for (let round = 1; round <= ROUNDS; round++) {
      const version = `v${round}`;
      const baseline = await dockerRun(`${registry}/${IMAGE}:${version}`, version);
      const onNetwork = await dockerRun(`${registry}/${IMAGE}:${version}`, version, network);
      const pushed = await toLive(berth, host, version, deploy(version));
      deployed.set(version, pushed.id);
      push.push({
        baseline_ms: baseline,
        docker_run_on_network_ms: onNetwork,
        berth_ms: pushed.ms,
        ratio: pushed.ms / baseline,
        ...moments(pushed.timeline),
      });
      const previous = `v${round - 1}`;
      const back = await dockerRun(`${registry}/${IMAGE}:${previous}`, previous);
      const restored = await toLive(berth, host, previous, () =>
        call(berth, 'POST', `${servicePath}/rollback`, { deployment_id: deployed.get(previous) }),
      );
      rollback.push({
        baseline_ms: back,
        berth_ms: restored.ms,
        ratio: restored.ms / back,
        ...moments(restored.timeline),
      });
      log(`push round ${round}: ${JSON.stringify(push.at(-1))}`);
      log(`rollback round ${round}: ${JSON.stringify(rollback.at(-1))}`);
    }
    const met = (m: Record<string, number>) => (m.ratio ?? Number.POSITIVE_INFINITY) <= TARGET_RATIO;
    addRow(
      'push to live, docker: POST deploy until the ingress serves it, vs docker run to 200',
      `<= ${TARGET_RATIO}x`,
      push,
      met,
    );
    addRow(
      'rollback, docker: POST rollback until the ingress serves the previous version, vs docker run to 200',
      `<= ${TARGET_RATIO}x`,
      rollback,
      met,
    );
  } finally {
    for (const cleanup of cleanups.reverse().splice(0)) await cleanup().catch(() => undefined);
  }
}

/**
 * The swarm row: a one-node test swarm (test/helpers/swarm.ts: an engine in a network namespace, slot
 * BENCH_SWARM_SLOT, default 9), Berth's swarm provider against `docker service update --image` of a
 * plain service of the same images (published on the node, the CLI's defaults: stop-first) until the
 * new version answers there.
 */
export async function swarmPushRows(addRow: AddRow): Promise<void> {
  process.env.BERTH_SWARM_SLOT = process.env.BENCH_SWARM_SLOT ?? '9';
  const { startSwarm } = await import('../test/helpers/swarm.ts');
  log('push to live, swarm: a one-node swarm and images');
  const swarm = await startSwarm(1);
  try {
    const onSwarm = (...args: string[]) =>
      exec('docker', args, { env: { ...process.env, DOCKER_HOST: swarm.dockerHost }, maxBuffer: 1 << 24 });
    await buildVersions(swarm.registry, ROUNDS + 1, onSwarm);
    const node = (await swarm.manager.listNodes())[0] as { Status?: { Addr?: string } };
    const address = node.Status?.Addr ?? '';
    const baselinePort = 18080;
    const baseline = 'berth-bench-baseline';
    await onSwarm(
      'service',
      'create',
      '--detach',
      '--name',
      baseline,
      '--publish',
      `mode=host,target=8080,published=${baselinePort}`,
      `${swarm.registry}/${IMAGE}:v0`,
    );
    const answering = (version: string) =>
      settle(`the baseline to answer ${version}`, async () => {
        const res = await get(baselinePort, 'localhost', address);
        return res?.status === 200 && res.body.trim() === version ? true : undefined;
      });
    await answering('v0');
    const berth = await startBerth(swarm.registry, {
      BERTH_PROVIDER: 'swarm',
      DOCKER_HOST: swarm.dockerHost,
    });
    const { data } = await call(berth, 'POST', `/v1/environments/${berth.envId}/services`, {
      name: 'Swarm push',
      source: 'docker_image',
      docker_registry: swarm.registry,
      docker_image: IMAGE,
      type: 'web',
      port: 8080,
      replica_count: 1,
      cpu_count_min: 0.1,
      memory_mb_min: 16,
    });
    const service = data.service as { id: string; subdomain: string };
    const host = `${service.subdomain}.localhost`;
    const deploy = (tag: string) => () =>
      call(berth, 'POST', `/v1/environments/${berth.envId}/services/${service.id}/deploy`, {
        docker_image_tag: tag,
      });
    await toLive(berth, host, 'v0', deploy('v0'), false);
    const rounds: Record<string, number>[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const version = `v${round}`;
      const started = performance.now();
      await onSwarm(
        'service',
        'update',
        '--detach',
        '--image',
        `${swarm.registry}/${IMAGE}:${version}`,
        baseline,
      );
      await answering(version);
      const base = performance.now() - started;
      const pushed = await toLive(berth, host, version, deploy(version));
      rounds.push({
        baseline_ms: base,
        berth_ms: pushed.ms,
        ratio: pushed.ms / base,
        ...Object.fromEntries(Object.entries(pushed.timeline).map(([mark, ms]) => [`berth_${mark}_ms`, ms])),
      });
      log(`swarm push round ${round}: ${JSON.stringify(rounds.at(-1))}`);
    }
    addRow(
      'push to live, swarm: POST deploy until the ingress serves it, vs docker service update until it answers',
      `<= ${TARGET_RATIO}x`,
      rounds,
      (m) => (m.ratio ?? Number.POSITIVE_INFINITY) <= TARGET_RATIO,
    );
  } finally {
    for (const cleanup of cleanups.reverse().splice(0)) await cleanup().catch(() => undefined);
    await swarm.down();
  }
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const print: AddRow = (measure, target, rounds, met) => {
    const keys = Object.keys(rounds[0] ?? {});
    const med = Object.fromEntries(
      keys.map((k) => [k, Math.round(median(rounds.map((r) => r[k] ?? 0)) * 100) / 100]),
    );
    console.log(`| ${measure} | ${JSON.stringify(med)} | ${target} | ${met(med) ? 'yes' : 'no'} |`);
  };
  const only = process.env.BENCH_PUSH_ROWS?.split(',') ?? ['docker', 'swarm'];
  if (only.includes('docker')) await pushToLiveRows(print);
  if (only.includes('swarm')) await swarmPushRows(print);
}

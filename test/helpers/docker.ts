import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { demultiplex } from '../../src/providers/engine/output.ts';
import { pollUntil } from './poll.ts';
import { api, deploymentEnd } from './process.ts';

/**
 * What the docker-provider suites need: the Docker Engine (started by .ci/run), a local registry
 * (Debian's docker-registry), images built here from a static busybox (Debian's busybox-static), and
 * plain HTTP with a Host header to reach services through Berth's ingress.
 */
export const docker = new Docker();

export async function requireDocker(): Promise<void> {
  try {
    await docker.ping();
  } catch (error) {
    throw new Error(
      `the docker-provider tests need a running Docker Engine (bash .ci/run installs and starts one): ${(error as Error).message}`,
    );
  }
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Registry {
  address: string;
  /** Where it keeps the images. */
  storage: string;
  stop(): Promise<void>;
}

/**
 * Debian's docker-registry on `host` (another machine's engines reach it there), at a free port unless
 * given; over another registry's `storage` when given (it serves the same images; stopping it leaves them).
 */
export async function startRegistry(
  host = '127.0.0.1',
  chosenPort?: number,
  sharedStorage?: string,
): Promise<Registry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-registry-'));
  const port = chosenPort ?? (await freePort());
  const config = path.join(dir, 'config.yml');
  const storage = sharedStorage ?? path.join(dir, 'data');
  fs.writeFileSync(
    config,
    `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\nhttp:\n  addr: ${host}:${port}\n`,
  );
  const child = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
  const address = `${host}:${port}`;
  await pollUntil('the registry to answer', async () => {
    const res = await fetch(`http://${address}/v2/`).catch(() => null);
    return res?.ok ? true : undefined;
  });
  return {
    address,
    storage,
    stop: async () => {
      child.kill('SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function followBuild(stream: NodeJS.ReadableStream): Promise<void> {
  const output = await new Promise<{ error?: string }[]>((resolve, reject) =>
    docker.modem.followProgress(stream, (error, result) => (error ? reject(error) : resolve(result))),
  );
  const failed = output.find((line) => line.error);
  if (failed) throw new Error(failed.error);
}

/** Builds an image from a Dockerfile text, with the static busybox and `files` (name to text) beside it. */
export async function buildImage(
  tag: string,
  dockerfile: string,
  files: Record<string, string> = {},
): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-image-'));
  try {
    fs.copyFileSync('/bin/busybox', path.join(dir, 'busybox'));
    fs.writeFileSync(path.join(dir, 'Dockerfile'), dockerfile);
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
    await followBuild(
      await docker.buildImage(
        { context: dir, src: ['Dockerfile', 'busybox', ...Object.keys(files)] },
        { t: tag, rm: true },
      ),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A root filesystem of one static busybox and its applets: `berth-test/busybox:latest`. */
export const BASE_IMAGE = 'berth-test/busybox:latest';
export async function buildBaseImage(): Promise<void> {
  await buildImage(
    BASE_IMAGE,
    'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nCMD ["/bin/sh"]\n',
  );
}

export async function pushImage(reference: string): Promise<void> {
  // The Engine wants an X-Registry-Auth header even for an anonymous push.
  const stream = await docker.getImage(reference).push({ authconfig: {} });
  await followBuild(stream);
}

/** GET through the ingress with a chosen Host header (fetch cannot set Host). */
export function viaIngress(
  port: number,
  host: string,
  urlPath = '/',
  address = '127.0.0.1',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: address, port, path: urlPath, headers: { host }, timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

/**
 * The environment of a running container's main process (PID 1, as it runs after any exec), each value
 * as its SHA-256 (hex), read from /proc inside the container.
 */
export async function processEnvironment(
  engine: Docker,
  containerId: string,
): Promise<Record<string, string>> {
  const exec = await engine.getContainer(containerId).exec({
    Cmd: ['cat', '/proc/1/environ'],
    AttachStdout: true,
    AttachStderr: true,
  });
  const chunks: Buffer[] = [];
  for await (const chunk of await exec.start({})) chunks.push(chunk as Buffer);
  const entries = demultiplex(Buffer.concat(chunks))
    .split('\0')
    .filter((entry) => entry.includes('='))
    .map((entry) => {
      const at = entry.indexOf('=');
      return [
        entry.slice(0, at),
        createHash('sha256')
          .update(entry.slice(at + 1))
          .digest('hex'),
      ];
    });
  return Object.fromEntries(entries);
}

export async function containersOfService(serviceId: string, all = true) {
  return docker.listContainers({ all, filters: { label: [`berth.service=${serviceId}`] } });
}

/** Removes what a test's environment left in Docker: its containers, their volumes and its network. */
export async function removeEnvironment(envId: string): Promise<void> {
  const containers = await docker.listContainers({
    all: true,
    filters: { label: [`berth.environment=${envId}`] },
  });
  for (const c of containers) await docker.getContainer(c.Id).remove({ force: true });
  const { Volumes } = await docker.listVolumes({ filters: { label: [`berth.environment=${envId}`] } });
  for (const v of Volumes) await docker.getVolume(v.Name).remove();
  const networks = await docker.listNetworks({ filters: { label: [`berth.environment=${envId}`] } });
  for (const n of networks) await docker.getNetwork(n.Id).remove();
}

/** A running Berth's first start, as process.ts's firstStartOf gives it, and the server's URL. */
export interface StartedBerth {
  url: string;
  token: string;
  envUrl: string;
}

/** Creates a one-replica web service on port 8080 from `fields` (its image, registry, name) and returns it. */
export async function createWebService(
  berth: StartedBerth,
  fields: Record<string, unknown>,
): Promise<{ id: string; subdomain: string }> {
  const created = await api(`${berth.envUrl}/services`, berth.token, 'POST', {
    source: 'docker_image',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    ...fields,
  });
  if (created.status !== 200) throw new Error(`creating the service: ${JSON.stringify(created.body)}`);
  return created.body.data.service;
}

/** Deploys `tag` of the service and waits for the deployment to succeed; its id. */
export async function deploySuccessfully(
  berth: StartedBerth,
  serviceId: string,
  tag: string,
): Promise<string> {
  const res = await api(`${berth.envUrl}/services/${serviceId}/deploy`, berth.token, 'POST', {
    docker_image_tag: tag,
  });
  const end = await deploymentEnd(berth.url, berth.token, res.body.data.deployment_id, 120_000);
  if (end.state !== 'success') throw new Error(`deployment of ${tag} failed: ${end.failure_reason}`);
  return end.id as string;
}

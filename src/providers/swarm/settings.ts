import type Docker from 'dockerode';
import { ConfigError, intSetting } from '../../config.ts';
import { type DockerSettings, dockerSettings } from '../engine/settings.ts';

/** The swarm driver's settings: the Engine drivers' shared ones (ingress, pulls, git) and its own. */
export interface SwarmSettings extends DockerSettings {
  /** DOCKER_HOST: a manager's Engine API; unset, the local engine (which must be a manager). */
  engine: Docker.DockerOptions | undefined;
  /** BERTH_SWARM_REGISTRY: where images built from git are pushed, so that every node can pull them. */
  registry: string | null;
  /** BERTH_SWARM_ENCRYPT_NETWORKS=true: environment overlays encrypt their traffic between nodes (IPsec). */
  encryptNetworks: boolean;
  /** BERTH_SWARM_MONITOR_S: how long each updated replica is watched for a failure before the next one. */
  monitorSeconds: number;
  /** BERTH_SWARM_REQUEST_IMAGE: the image (with `wget`) of the tasks that make ops.json cron jobs' requests. */
  requestImage: string;
  /**
   * BERTH_SWARM_NODE_ENGINES: each node's own Engine API, by the node's hostname or ID: where the CPU,
   * memory and network of the replicas it runs are read (a node not listed: its replicas' are unknown).
   */
  nodeEngines: Map<string, Docker.DockerOptions>;
}

/** An Engine's address as dockerode options: `unix:///path` or `tcp://host:port` (plain HTTP). */
function engineAt(host: string, setting: string): Docker.DockerOptions {
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) };
  const url = URL.canParse(host) ? new URL(host) : null;
  if (url?.protocol !== 'tcp:' || !url.port) {
    throw new ConfigError(`${setting} must be unix:///path or tcp://host:port, got "${host}"`);
  }
  return { host: url.hostname, port: Number(url.port), protocol: 'http' };
}

/** DOCKER_HOST as dockerode options. */
function engineOf(env: NodeJS.ProcessEnv): Docker.DockerOptions | undefined {
  const host = env.DOCKER_HOST;
  // The process's own DOCKER_HOST (with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH) is read by dockerode.
  if (!host || host === process.env.DOCKER_HOST) return undefined;
  return engineAt(host, 'DOCKER_HOST');
}

/** BERTH_SWARM_NODE_ENGINES: `node=address` pairs, comma-separated (a node by its hostname or ID). */
function nodeEnginesOf(env: NodeJS.ProcessEnv): Map<string, Docker.DockerOptions> {
  const engines = new Map<string, Docker.DockerOptions>();
  for (const pair of (env.BERTH_SWARM_NODE_ENGINES ?? '').split(',')) {
    if (!pair.trim()) continue;
    const at = pair.indexOf('=');
    const node = pair.slice(0, at).trim();
    if (at < 1 || !node) {
      throw new ConfigError(
        `BERTH_SWARM_NODE_ENGINES must be node=address pairs separated by commas (like node-1=tcp://10.0.0.1:2375), got "${pair.trim()}"`,
      );
    }
    engines.set(node, engineAt(pair.slice(at + 1).trim(), `BERTH_SWARM_NODE_ENGINES (${node})`));
  }
  return engines;
}

export function swarmSettings(env: NodeJS.ProcessEnv): SwarmSettings {
  const encrypt = env.BERTH_SWARM_ENCRYPT_NETWORKS ?? 'false';
  if (encrypt !== 'true' && encrypt !== 'false') {
    throw new ConfigError(`BERTH_SWARM_ENCRYPT_NETWORKS must be true or false, got "${encrypt}"`);
  }
  return {
    ...dockerSettings(env),
    engine: engineOf(env),
    registry: env.BERTH_SWARM_REGISTRY?.replace(/\/$/, '') || null,
    encryptNetworks: encrypt === 'true',
    monitorSeconds: intSetting(env, 'BERTH_SWARM_MONITOR_S', 10, 1, 600),
    requestImage: env.BERTH_SWARM_REQUEST_IMAGE || 'busybox:stable',
    nodeEngines: nodeEnginesOf(env),
  };
}

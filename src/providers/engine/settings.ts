import path from 'node:path';
import { ConfigError, gitBaseUrlSetting, intSetting, withoutPassword } from '../../config.ts';

/** What serves the ingress's HTTPS: this Node process, or HAProxy configured by it. */
export type IngressProxy = 'node' | 'haproxy';

/** The settings of the drivers on the Engine API (docker, swarm), parsed by each from the environment. */
export interface DockerSettings {
  /** BERTH_INGRESS_HOST: host name services live under: `{subdomain}.{ingressHost}`. */
  ingressHost: string;
  /** BERTH_INGRESS_PORT: the ingress's port. */
  ingressPort: number;
  /** BERTH_INGRESS_HTTPS_PORT: the ingress's HTTPS port, served when ACME is on (docs/https.md). */
  ingressHttpsPort: number;
  /**
   * BERTH_INGRESS_PROXY: what serves the ingress's HTTPS, `node` (this process, the default) or
   * `haproxy` (a HAProxy process Berth runs and configures: docs/https.md).
   */
  ingressProxy: IngressProxy;
  /**
   * BERTH_ACME_CHALLENGE is tls-alpn-01: the CA's `acme-tls/1` handshakes come to the HTTPS port, which
   * HAProxy then inspects before terminating TLS, to pass those to Berth (docs/https.md).
   */
  ingressAlpnChallenges: boolean;
  /** BERTH_PUBLIC_URL: where the public reaches the ingress (scheme, host, port): origins use it. */
  publicUrl: string;
  /** BERTH_INGRESS_BIND: the address the ingress listens on, apart from BERTH_HOST, so exposing apps never exposes the API. */
  ingressBind: string;
  /** BERTH_PULL_TIMEOUT_MS: a pull not finished by then fails with that reason (a silent registry never answers). */
  pullTimeoutMs: number;
  /** BERTH_GIT_BASE_URL: where `org/repo` is cloned from. */
  gitBaseUrl: string;
  /**
   * The images ops.json dependencies run from, per engine: BERTH_DOCKER_POSTGRES_IMAGE,
   * BERTH_DOCKER_MARIADB_IMAGE, BERTH_DOCKER_REDIS_IMAGE, BERTH_DOCKER_S3_IMAGE (docs/docker-provider.md
   * says what each must do; tools/dependency-images/build.sh builds the defaults).
   */
  dependencyImages: Record<'postgres' | 'mariadb' | 'redis' | 's3', string>;
  /**
   * BERTH_DEPENDENCY_BACKUP_DIR: where dependency backups are written (one folder per environment and
   * dependency); by default `dependencies` in BERTH_BACKUP_DIR (Berth's own backup target) if set, else
   * `backups/dependencies` in the data directory.
   */
  backupDir: string;
  /**
   * BERTH_DOCKER_SANDBOXES (on unless `off`): each replica slot gets its network sandbox made ahead and a
   * new version starts in it (docker/sandboxes.ts). Off: every replica gets its network made as it starts.
   */
  sandboxes: boolean;
  /**
   * BERTH_DOCKER_SANDBOX_IMAGE: the sandboxes' image, one whose command keeps running (a "pause" image);
   * unset, Berth makes its own (docker/pause-image.ts).
   */
  sandboxImage: string | undefined;
}

/**
 * Where services answer: `{subdomain}.{ingressHost}` on the ingress's port, or behind a proxy at
 * BERTH_PUBLIC_URL (its scheme and port; its host is the ingress host, since the proxy passes Host on).
 */
function ingressAddresses(
  env: NodeJS.ProcessEnv,
): Pick<DockerSettings, 'ingressHost' | 'ingressPort' | 'publicUrl'> {
  const ingressPort = intSetting(env, 'BERTH_INGRESS_PORT', 8088, 1, 65535);
  const raw = env.BERTH_PUBLIC_URL;
  if (!raw) {
    const ingressHost = env.BERTH_INGRESS_HOST || 'localhost';
    return { ingressHost, ingressPort, publicUrl: `http://${ingressHost}:${ingressPort}` };
  }
  // The raw text too: the URL parser forgives what is surely a mistake (`https:host`, spaces around,
  // an empty `?` or `#`, a password without a user).
  const url = /^https?:\/\/[^\s?#@]+$/i.test(raw) && URL.canParse(raw) ? new URL(raw) : null;
  if (url?.pathname !== '/') {
    throw new ConfigError(
      `BERTH_PUBLIC_URL must be http:// or https:// with a host and an optional port, nothing else (like https://apps.example.com), got "${withoutPassword(raw)}"`,
    );
  }
  const ingressHost = env.BERTH_INGRESS_HOST || url.hostname;
  if (ingressHost !== url.hostname) {
    throw new ConfigError(
      `BERTH_PUBLIC_URL's host must be BERTH_INGRESS_HOST (${ingressHost}): services answer at {subdomain}.${ingressHost}`,
    );
  }
  return { ingressHost, ingressPort, publicUrl: url.origin };
}

function onOffSetting(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'on') return true;
  if (raw === 'off') return false;
  throw new ConfigError(`${name} must be "on" or "off", got "${raw}"`);
}

function ingressProxySetting(env: NodeJS.ProcessEnv): IngressProxy {
  const value = env.BERTH_INGRESS_PROXY || 'node';
  if (value !== 'node' && value !== 'haproxy') {
    throw new ConfigError(`BERTH_INGRESS_PROXY must be node or haproxy, not ${JSON.stringify(value)}`);
  }
  return value;
}

export function dockerSettings(env: NodeJS.ProcessEnv): DockerSettings {
  return {
    ...ingressAddresses(env),
    ingressBind: env.BERTH_INGRESS_BIND || '127.0.0.1',
    ingressHttpsPort: intSetting(env, 'BERTH_INGRESS_HTTPS_PORT', 443, 0, 65535),
    ingressProxy: ingressProxySetting(env),
    ingressAlpnChallenges: env.BERTH_ACME_CHALLENGE === 'tls-alpn-01',
    gitBaseUrl: gitBaseUrlSetting(env),
    pullTimeoutMs: intSetting(env, 'BERTH_PULL_TIMEOUT_MS', 600_000, 1_000, 3_600_000),
    backupDir: path.resolve(
      env.BERTH_DEPENDENCY_BACKUP_DIR ||
        (env.BERTH_BACKUP_DIR
          ? path.join(env.BERTH_BACKUP_DIR, 'dependencies')
          : path.join(env.BERTH_DATA_DIR || '.berth', 'backups', 'dependencies')),
    ),
    sandboxes: onOffSetting(env, 'BERTH_DOCKER_SANDBOXES', true),
    sandboxImage: env.BERTH_DOCKER_SANDBOX_IMAGE || undefined,
    dependencyImages: {
      postgres: env.BERTH_DOCKER_POSTGRES_IMAGE || 'berth-deps/postgres:latest',
      mariadb: env.BERTH_DOCKER_MARIADB_IMAGE || 'berth-deps/mariadb:latest',
      redis: env.BERTH_DOCKER_REDIS_IMAGE || 'berth-deps/redis:latest',
      s3: env.BERTH_DOCKER_S3_IMAGE || 'berth-deps/s3:latest',
    },
  };
}

import path from 'node:path';

export type ProviderName = 'sim' | 'docker' | 'kubernetes';

/** Every setting Berth reads, with its default. The table in README.md mirrors this file. */
export interface Config {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  adminToken: string | undefined;
  masterKey: string | undefined;
  provider: ProviderName;
  simStepMs: number;
  dnsServers: string[];
  ingressHost: string;
  ingressPort: number;
  /** The public address of the docker provider's ingress (scheme, host, port): what origins are built on. */
  publicUrl: string;
  /** Address the docker provider's ingress listens on: apart from BERTH_HOST, so exposing apps never exposes the API. */
  ingressBind: string;
  gitBaseUrl: string;
  /** Registry hosts docker_image services may pull from; empty: any. */
  allowedRegistries: string[];
  pullTimeoutMs: number;
  rateLimitPerMin: number;
  /** Failed authentications one client address may make per minute before it gets 429. */
  authFailuresPerMin: number;
  /** Time for a whole request (headers and body) to arrive; slower ones get 408 and are closed. */
  requestTimeoutMs: number;
  /** Time for a request's headers to arrive. */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  jobLeaseMs: number;
  logLevel: string;
}

export class ConfigError extends Error {}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/**
 * Where services answer: `{subdomain}.{ingressHost}` on the ingress's port, or behind a proxy at
 * BERTH_PUBLIC_URL (its scheme and port; its host is the ingress host, since the proxy passes Host on).
 */
function ingressAddresses(env: NodeJS.ProcessEnv): Pick<Config, 'ingressHost' | 'ingressPort' | 'publicUrl'> {
  const ingressPort = int(env, 'BERTH_INGRESS_PORT', 8088, 1, 65535);
  const raw = env.BERTH_PUBLIC_URL;
  if (!raw) {
    const ingressHost = env.BERTH_INGRESS_HOST || 'localhost';
    return { ingressHost, ingressPort, publicUrl: `http://${ingressHost}:${ingressPort}` };
  }
  const url = URL.canParse(raw) ? new URL(raw) : null;
  if (!url || !/^https?:$/.test(url.protocol) || url.pathname !== '/' || url.search || url.username) {
    throw new ConfigError(
      `BERTH_PUBLIC_URL must be http:// or https:// with a host and an optional port, nothing else (like https://apps.example.com), got "${raw}"`,
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

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const provider = env.BERTH_PROVIDER || 'sim';
  if (provider !== 'sim' && provider !== 'docker' && provider !== 'kubernetes') {
    throw new ConfigError(`BERTH_PROVIDER must be one of sim, docker, kubernetes, got "${provider}"`);
  }
  const databaseUrl = env.BERTH_DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(
      'BERTH_DATABASE_URL must start with postgres:// (leave it unset for the embedded database)',
    );
  }
  const requestTimeoutMs = int(env, 'BERTH_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  const headersTimeoutMs = int(env, 'BERTH_HEADERS_TIMEOUT_MS', 10_000, 100, 3_600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `BERTH_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed BERTH_REQUEST_TIMEOUT_MS (${requestTimeoutMs}): the headers are part of the request`,
    );
  }
  return {
    host: env.BERTH_HOST || '127.0.0.1',
    port: int(env, 'BERTH_PORT', 8080, 0, 65535),
    databaseUrl,
    dataDir: path.resolve(env.BERTH_DATA_DIR || '.berth'),
    adminToken: env.BERTH_ADMIN_TOKEN || undefined,
    masterKey: env.BERTH_MASTER_KEY || undefined,
    provider,
    simStepMs: int(env, 'BERTH_SIM_STEP_MS', 500, 0, 600_000),
    dnsServers: (env.BERTH_DNS_SERVERS || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    ...ingressAddresses(env),
    ingressBind: env.BERTH_INGRESS_BIND || '127.0.0.1',
    gitBaseUrl: env.BERTH_GIT_BASE_URL || 'https://github.com/',
    allowedRegistries: (env.BERTH_ALLOWED_REGISTRIES || '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
    // A pull that has not finished by then fails with that reason (a silent registry never answers).
    pullTimeoutMs: int(env, 'BERTH_PULL_TIMEOUT_MS', 600_000, 1_000, 3_600_000),
    rateLimitPerMin: int(env, 'BERTH_RATE_LIMIT_PER_MIN', 1200, 1, 10_000_000),
    // Enough for a misconfigured client to see its 401s; far too few to cost the database anything.
    authFailuresPerMin: int(env, 'BERTH_AUTH_FAILURES_PER_MIN', 60, 1, 10_000_000),
    // Bodies are at most 1 MiB: 30 s is ample even on a slow link, and a client trickling bytes
    // cannot hold a connection longer than that.
    requestTimeoutMs,
    headersTimeoutMs,
    // Longer than the 60 s idle timeout of common load balancers, so the balancer closes first.
    keepAliveTimeoutMs: int(env, 'BERTH_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    // A worker renews its lease every third of this; a job whose lease lapses is run again.
    jobLeaseMs: int(env, 'BERTH_JOB_LEASE_MS', 15_000, 1_000, 3_600_000),
    logLevel: env.BERTH_LOG_LEVEL || 'info',
  };
}

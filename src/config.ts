import path from 'node:path';
import { isCronExpression } from './domain/cron-expression.ts';
import { notADirectory } from './domain/directories.ts';
import { DEFAULT_EVENT_RETENTION_HOURS } from './domain/events.ts';
import { isCidr } from './domain/ops-json.ts';

/** Every setting Berth reads, with its default. The table in README.md mirrors this file. */
export interface Config {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  adminToken: string | undefined;
  masterKey: string | undefined;
  /** Rows a master key rotation re-seals per transaction. */
  keyRotationBatch: number;
  /** A pause between a rotation's batches, to leave the database to the requests it serves. */
  keyRotationPauseMs: number;
  /** BERTH_BACKUP_SCHEDULE: a cron expression (UTC); unset, no scheduled backups (docs/operations.md). */
  backupSchedule: string | undefined;
  /** BERTH_BACKUP_DIR: where scheduled backups are written (default BERTH_DATA_DIR/backups). */
  backupDir: string;
  /** BERTH_BACKUP_KEEP: how many scheduled backups retention keeps in backupDir (or the bucket). */
  backupKeep: number;
  /** BERTH_BACKUP_S3_URL (s3://bucket/prefix): scheduled backups go to this bucket instead of backupDir. */
  backupS3: BackupS3Target | undefined;
  /** BERTH_PROVIDER: a driver's name; unset, providers/registry.ts chooses its default. */
  provider: string | undefined;
  /** The environment the driver reads its own settings from (each driver parses its own). */
  providerEnv: NodeJS.ProcessEnv;
  dnsServers: string[];
  /** Registry hosts docker_image services may pull from; empty: any. */
  allowedRegistries: string[];
  rateLimitPerMin: number;
  /**
   * BERTH_TRUST_PROXY: the proxies (addresses and CIDRs) whose X-Forwarded-For / -Proto are believed;
   * empty: none, the socket's peer is the client.
   */
  trustProxy: string[];
  /** BERTH_TLS_CERT_FILE / BERTH_TLS_KEY_FILE: the API serves HTTPS with these PEM files (read at start). */
  tls: { certFile: string; keyFile: string } | undefined;
  /**
   * ACME (docs/https.md): on when BERTH_ACME_EMAIL or BERTH_ACME_DIRECTORY_URL is set. The directory
   * defaults to Let's Encrypt's production one; `caFile` (BERTH_ACME_CA_FILE) is a root the directory's
   * own HTTPS is trusted with besides the system's (a private CA, a test CA).
   */
  acme:
    | {
        directoryUrl: string;
        email: string | undefined;
        caFile: string | undefined;
        /** BERTH_ACME_CHALLENGE: how custom domains are validated (the ingress answers either). */
        challenge: AcmeChallenge;
        /** BERTH_ACME_DNS_*: an RFC 2136 server for DNS-01, which gets the ingress domain a wildcard. */
        dns: AcmeDnsUpdate | undefined;
      }
    | undefined;
  /** BERTH_TLS_ACME_NAME: the API served over HTTPS with an ACME certificate for this host name. */
  tlsAcmeName: string | undefined;
  /** BERTH_ACME_RETRY_BASE_MS: the first wait after a name's failed order (then doubling, at most a day). */
  acmeRetryBaseMs: number;
  /** BERTH_ACME_SCAN_MS: how often each worker process looks for certificates due (renewal, a retry). */
  acmeScanMs: number;
  /** Failed authentications one client address may make per minute before it gets 429. */
  authFailuresPerMin: number;
  /** Streams (events, log follows) one API token may hold open at once in one process; more get 429. */
  streamsPerToken: number;
  /** The same for all of an account's tokens together. */
  streamsPerAccount: number;
  /** Time for a whole request (headers and body) to arrive; slower ones get 408 and are closed. */
  requestTimeoutMs: number;
  /** Time for a request's headers to arrive. */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  jobLeaseMs: number;
  /** Jobs of one account a process runs at once, of its slots for jobs other than webhook deliveries. */
  jobConcurrencyPerAccount: number;
  /** Webhook deliveries a process sends at once, in slots apart from every other job's. */
  webhookConcurrency: number;
  /** Webhook deliveries of one account a process sends at once. */
  webhookConcurrencyPerAccount: number;
  /** Hours an event is kept for GET /v1/events resumes and webhook redeliveries. */
  eventRetentionHours: number;
  /** Days services' runtime metrics are kept (BERTH_METRICS_RETENTION_DAYS); older ones are dropped. */
  metricsRetentionDays: number;
  /**
   * BERTH_METRICS_INTERVAL_MS: how often each process's collector looks for services not yet sampled
   * this minute (a minute keeps one sample; shorter only samples sooner after the minute starts); 0: off.
   */
  metricsIntervalMs: number;
  /** Hours between scheduled backups of each ops.json database and cache; 0: none scheduled. */
  dependencyBackupIntervalHours: number;
  /** Completed backups kept per dependency (a dependency's `backup_keep` wins). */
  dependencyBackupKeep: number;
  /** Webhook receivers on private, loopback or link-local addresses are allowed (off: refused, SSRF). */
  webhookAllowPrivate: boolean;
  /** The first wait before a failed webhook delivery is tried again (then four times longer each time). */
  webhookRetryBaseMs: number;
  /** BERTH_GIT_BASE_URL: where a git service's `org/repo` lives when it names no connection. */
  gitBaseUrl: string;
  /** BERTH_SMTP_URL (smtp:// or smtps://): invitations are mailed through it; unset: shown only. */
  smtpUrl: string | undefined;
  /** BERTH_MAIL_FROM: the sender of Berth's mail. */
  mailFrom: string;
  /** BERTH_GIT_POLL_INTERVAL_MS: how often the git poller asks each auto_deploy branch for its head; 0: off. */
  gitPollIntervalMs: number;
  logLevel: string;
  /** BERTH_METRICS_BIND: where GET /metrics listens (docs/metrics.md); unset, no metrics are collected. */
  metricsBind: { host: string; port: number } | undefined;
}

export class ConfigError extends Error {}

export const ACME_CHALLENGES = ['http-01', 'tls-alpn-01'] as const;
export type AcmeChallenge = (typeof ACME_CHALLENGES)[number];

/** The TSIG algorithms an RFC 2136 server is addressed with (RFC 8945's HMACs; MD5 is not offered). */
export const TSIG_ALGORITHMS = [
  'hmac-sha256',
  'hmac-sha384',
  'hmac-sha512',
  'hmac-sha224',
  'hmac-sha1',
] as const;
export type TsigAlgorithm = (typeof TSIG_ALGORITHMS)[number];

/** Where DNS-01's TXT records are written, by RFC 2136 UPDATE signed with TSIG. */
export interface AcmeDnsUpdate {
  /** BERTH_ACME_DNS_SERVER: the zone's primary, `host` or `host:port` (53). */
  server: { host: string; port: number };
  /** BERTH_ACME_DNS_ZONE: the zone the records are written in, lower case, no final dot. */
  zone: string;
  /** BERTH_ACME_DNS_TSIG_KEY / _ALGORITHM / _SECRET (base64; never logged or shown). */
  tsig: { name: string; algorithm: TsigAlgorithm; secret: Buffer };
}

export interface BackupS3Target {
  bucket: string;
  /** Prepended to each object's name: '' or ending with a slash. */
  prefix: string;
  /** BERTH_BACKUP_S3_ENDPOINT: an S3-compatible service (MinIO, R2, ...), addressed path-style; unset, AWS. */
  endpoint: string | undefined;
  /** BERTH_BACKUP_S3_REGION, else AWS_REGION, else us-east-1. */
  region: string;
}

/** A whole-number setting within bounds; drivers use it for their own settings too. */
export function intSetting(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

/** The collector's interval: 0 turns it off; otherwise one second at least (each round reads the database). */
function metricsIntervalSetting(env: NodeJS.ProcessEnv): number {
  const value = intSetting(env, 'BERTH_METRICS_INTERVAL_MS', 60_000, 0, 3_600_000);
  if (value > 0 && value < 1_000) {
    throw new ConfigError(
      `BERTH_METRICS_INTERVAL_MS must be 0 (off) or from 1000 to 3600000, got "${env.BERTH_METRICS_INTERVAL_MS}"`,
    );
  }
  return value;
}

/** Where anonymous clones come from; the docker driver reads the same setting through this. */
export function gitBaseUrlSetting(env: NodeJS.ProcessEnv): string {
  return env.BERTH_GIT_BASE_URL || 'https://github.com/';
}

function trustProxySetting(env: NodeJS.ProcessEnv): string[] {
  const entries = (env.BERTH_TRUST_PROXY || '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = entries.find((entry) => !isCidr(entry));
  if (bad !== undefined) {
    throw new ConfigError(
      `BERTH_TRUST_PROXY must be a comma-separated list of IP addresses and CIDRs (10.0.0.0/8, ::1), got "${bad}"`,
    );
  }
  return entries;
}

function backupS3Setting(env: NodeJS.ProcessEnv): BackupS3Target | undefined {
  const raw = env.BERTH_BACKUP_S3_URL?.trim();
  const endpoint = env.BERTH_BACKUP_S3_ENDPOINT?.trim() || undefined;
  if (!raw) {
    if (endpoint)
      throw new ConfigError(
        'BERTH_BACKUP_S3_ENDPOINT is set without BERTH_BACKUP_S3_URL (s3://bucket/prefix)',
      );
    return undefined;
  }
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(raw);
  if (!match) {
    throw new ConfigError(`BERTH_BACKUP_S3_URL must be s3://bucket or s3://bucket/prefix, got "${raw}"`);
  }
  if (endpoint && !/^https?:\/\/[^\s/]+/.test(endpoint)) {
    throw new ConfigError(
      `BERTH_BACKUP_S3_ENDPOINT must be an http(s) URL, got "${withoutPassword(endpoint)}"`,
    );
  }
  const prefix = (match[2] ?? '').replace(/^\/+|\/+$/g, '');
  return {
    bucket: match[1] as string,
    prefix: prefix ? `${prefix}/` : '',
    endpoint,
    region: env.BERTH_BACKUP_S3_REGION || env.AWS_REGION || 'us-east-1',
  };
}

function backupScheduleSetting(env: NodeJS.ProcessEnv): string | undefined {
  const schedule = env.BERTH_BACKUP_SCHEDULE?.trim() || undefined;
  if (schedule !== undefined && !isCronExpression(schedule)) {
    throw new ConfigError(
      `BERTH_BACKUP_SCHEDULE must be a cron expression (for instance "0 3 * * *", every day at 03:00 UTC), got "${schedule}"`,
    );
  }
  return schedule;
}

function tlsSetting(env: NodeJS.ProcessEnv): Config['tls'] {
  const certFile = env.BERTH_TLS_CERT_FILE || undefined;
  const keyFile = env.BERTH_TLS_KEY_FILE || undefined;
  if (!certFile && !keyFile) return undefined;
  if (!certFile) throw new ConfigError('BERTH_TLS_CERT_FILE must be set too: BERTH_TLS_KEY_FILE is set');
  if (!keyFile) throw new ConfigError('BERTH_TLS_KEY_FILE must be set too: BERTH_TLS_CERT_FILE is set');
  return { certFile: path.resolve(certFile), keyFile: path.resolve(keyFile) };
}

export const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

function acmeSetting(env: NodeJS.ProcessEnv): Config['acme'] {
  const rawUrl = env.BERTH_ACME_DIRECTORY_URL || undefined;
  const email = env.BERTH_ACME_EMAIL || undefined;
  const caFile = env.BERTH_ACME_CA_FILE || undefined;
  if (!rawUrl && !email) {
    if (caFile)
      throw new ConfigError('BERTH_ACME_CA_FILE is set but ACME is off: set BERTH_ACME_DIRECTORY_URL');
    const orphan = ['BERTH_ACME_CHALLENGE', 'BERTH_ACME_DNS_SERVER'].find((name) => env[name]);
    if (orphan) throw new ConfigError(`${orphan} is set but ACME is off: set BERTH_ACME_EMAIL`);
    return undefined;
  }
  const url = rawUrl && URL.canParse(rawUrl) ? new URL(rawUrl) : null;
  if (rawUrl && (url?.protocol !== 'https:' || url.username || url.password)) {
    throw new ConfigError(
      `BERTH_ACME_DIRECTORY_URL must be the https:// URL of an ACME directory (like ${LETS_ENCRYPT_DIRECTORY}), got "${withoutPassword(rawUrl)}"`,
    );
  }
  if (email && !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) {
    throw new ConfigError(`BERTH_ACME_EMAIL must be an email address, got "${email}"`);
  }
  const challenge = (env.BERTH_ACME_CHALLENGE || 'http-01') as AcmeChallenge;
  if (!ACME_CHALLENGES.includes(challenge)) {
    throw new ConfigError(`BERTH_ACME_CHALLENGE must be http-01 or tls-alpn-01, got "${challenge}"`);
  }
  return {
    directoryUrl: url?.href ?? LETS_ENCRYPT_DIRECTORY,
    email,
    caFile: caFile ? path.resolve(caFile) : undefined,
    challenge,
    dns: acmeDnsSetting(env),
  };
}

const DNS_NAME =
  /^(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** BERTH_ACME_DNS_*: all of server, zone, key and secret, or none (the algorithm has a default). */
function acmeDnsSetting(env: NodeJS.ProcessEnv): AcmeDnsUpdate | undefined {
  const names = [
    'BERTH_ACME_DNS_SERVER',
    'BERTH_ACME_DNS_ZONE',
    'BERTH_ACME_DNS_TSIG_KEY',
    'BERTH_ACME_DNS_TSIG_SECRET',
  ] as const;
  const set = names.filter((name) => env[name]);
  if (set.length === 0) {
    if (env.BERTH_ACME_DNS_TSIG_ALGORITHM)
      throw new ConfigError('BERTH_ACME_DNS_TSIG_ALGORITHM is set but BERTH_ACME_DNS_SERVER is not');
    return undefined;
  }
  const missing = names.find((name) => !env[name]);
  if (missing)
    throw new ConfigError(
      `${missing} must be set too: ${set.join(', ')} ${set.length > 1 ? 'are' : 'is'} set`,
    );
  const rawServer = env.BERTH_ACME_DNS_SERVER as string;
  const server = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+))(?::(\d{1,5}))?$/.exec(rawServer);
  const port = Number(server?.[3] ?? 53);
  if (!server || port < 1 || port > 65535) {
    throw new ConfigError(
      `BERTH_ACME_DNS_SERVER must be host or host:port of the zone's primary (for instance 10.0.0.53:53), got "${rawServer}"`,
    );
  }
  const zone = (env.BERTH_ACME_DNS_ZONE as string).toLowerCase().replace(/\.$/, '');
  if (!DNS_NAME.test(zone)) {
    throw new ConfigError(
      `BERTH_ACME_DNS_ZONE must be a DNS zone name (example.com), got "${env.BERTH_ACME_DNS_ZONE}"`,
    );
  }
  const keyName = (env.BERTH_ACME_DNS_TSIG_KEY as string).toLowerCase().replace(/\.$/, '');
  if (!DNS_NAME.test(keyName)) {
    throw new ConfigError(
      `BERTH_ACME_DNS_TSIG_KEY must be the TSIG key's name as the server knows it (berth-acme), got "${env.BERTH_ACME_DNS_TSIG_KEY}"`,
    );
  }
  const algorithm = (env.BERTH_ACME_DNS_TSIG_ALGORITHM || 'hmac-sha256').toLowerCase() as TsigAlgorithm;
  if (!TSIG_ALGORITHMS.includes(algorithm)) {
    throw new ConfigError(
      `BERTH_ACME_DNS_TSIG_ALGORITHM must be one of ${TSIG_ALGORITHMS.join(', ')}, got "${env.BERTH_ACME_DNS_TSIG_ALGORITHM}"`,
    );
  }
  // The secret itself never appears in a message: only what is wrong with it.
  const rawSecret = (env.BERTH_ACME_DNS_TSIG_SECRET as string).trim();
  const secret = Buffer.from(rawSecret, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(rawSecret) || secret.length < 16) {
    throw new ConfigError(
      "BERTH_ACME_DNS_TSIG_SECRET must be the TSIG key's secret in base64, at least 16 bytes (as keymgr, tsig-keygen or knsupdate print it)",
    );
  }
  return {
    server: { host: (server[1] ?? server[2]) as string, port },
    zone,
    tsig: { name: keyName, algorithm, secret },
  };
}

/** A DNS name the API's ACME certificate is for: ACME on, and not beside certificate files. */
function tlsAcmeNameSetting(env: NodeJS.ProcessEnv): string | undefined {
  const raw = env.BERTH_TLS_ACME_NAME?.trim().toLowerCase() || undefined;
  if (!raw) return undefined;
  if (!/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/.test(raw)) {
    throw new ConfigError(
      `BERTH_TLS_ACME_NAME must be the host name clients reach the API at (like berth.example.com), got "${raw}"`,
    );
  }
  if (env.BERTH_TLS_CERT_FILE || env.BERTH_TLS_KEY_FILE) {
    throw new ConfigError(
      'BERTH_TLS_ACME_NAME and BERTH_TLS_CERT_FILE/BERTH_TLS_KEY_FILE are two ways to serve the API over HTTPS: set one',
    );
  }
  if (!env.BERTH_ACME_DIRECTORY_URL && !env.BERTH_ACME_EMAIL) {
    throw new ConfigError(
      'BERTH_TLS_ACME_NAME needs ACME on: set BERTH_ACME_EMAIL (or BERTH_ACME_DIRECTORY_URL)',
    );
  }
  return raw;
}

/** `host:port` (`[::1]:9464` for IPv6): an address of its own, never the API's. */
function bindSetting(env: NodeJS.ProcessEnv, name: string): { host: string; port: number } | undefined {
  const raw = env[name];
  if (!raw) return undefined;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(raw);
  const port = Number(match?.[3]);
  if (!match || port > 65535) {
    throw new ConfigError(`${name} must be host:port (for instance 127.0.0.1:9464), got "${raw}"`);
  }
  return { host: (match[1] ?? match[2]) as string, port };
}

/**
 * BERTH_DATA_DIR, made on first use. A file in its way is named here: else the first mkdir under it
 * fails as an unexpected EEXIST or ENOTDIR.
 */
function dataDirSetting(raw: string | undefined): string {
  const dir = path.resolve(raw || '.berth');
  const reason = notADirectory('BERTH_DATA_DIR', dir, ': name a directory (made if missing)');
  if (reason) throw new ConfigError(reason);
  return dir;
}

/** A URL setting as a refusal may quote it: a password in it (`user:password@`) shown as `***`. */
export function withoutPassword(raw: string): string {
  return raw.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/?#]*):[^@/?#]*@/i, '$1:***@');
}

/** BERTH_MAIL_FROM: an address, or a name and an address in angle brackets, as a From header takes it. */
function mailFromSetting(raw: string | undefined): string {
  if (!raw) return 'Berth <berth@localhost>';
  // Else every invitation's mail would be refused by the mail server, each logged, none at start.
  if (!/^(?:[^<>@]*<[^\s<>@]+@[^\s<>@]+>|[^\s<>@]+@[^\s<>@]+)$/.test(raw.trim())) {
    throw new ConfigError(
      `BERTH_MAIL_FROM must be an email address, or a name and one in angle brackets (Berth <berth@example.com>), got "${raw}"`,
    );
  }
  return raw.trim();
}

function smtpUrlSetting(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  if (!/^smtps?:\/\/[^/]/.test(raw)) {
    throw new ConfigError(
      `BERTH_SMTP_URL must start with smtp:// or smtps:// (for instance smtp://mail:25), got "${withoutPassword(raw)}"`,
    );
  }
  // Else the first invitation's mail would fail, far from the setting that caused it.
  if (!URL.canParse(raw) || !new URL(raw).hostname) {
    throw new ConfigError(
      `BERTH_SMTP_URL must name the mail server (for instance smtps://user:password@mail.example.com:465), got "${withoutPassword(raw)}"`,
    );
  }
  return raw;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const databaseUrl = env.BERTH_DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError(
      'BERTH_DATABASE_URL must start with postgres:// (leave it unset for the embedded database)',
    );
  }
  const requestTimeoutMs = intSetting(env, 'BERTH_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  const headersTimeoutMs = intSetting(env, 'BERTH_HEADERS_TIMEOUT_MS', 10_000, 100, 3_600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `BERTH_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed BERTH_REQUEST_TIMEOUT_MS (${requestTimeoutMs}): the headers are part of the request`,
    );
  }
  return {
    host: env.BERTH_HOST || '127.0.0.1',
    port: intSetting(env, 'BERTH_PORT', 8080, 0, 65535),
    databaseUrl,
    dataDir: dataDirSetting(env.BERTH_DATA_DIR),
    adminToken: env.BERTH_ADMIN_TOKEN || undefined,
    masterKey: env.BERTH_MASTER_KEY || undefined,
    // Small transactions: a batch holds its rows' locks for milliseconds.
    keyRotationBatch: intSetting(env, 'BERTH_KEY_ROTATION_BATCH', 200, 1, 10_000),
    keyRotationPauseMs: intSetting(env, 'BERTH_KEY_ROTATION_PAUSE_MS', 0, 0, 60_000),
    backupSchedule: backupScheduleSetting(env),
    backupDir: path.resolve(env.BERTH_BACKUP_DIR || path.join(env.BERTH_DATA_DIR || '.berth', 'backups')),
    backupKeep: intSetting(env, 'BERTH_BACKUP_KEEP', 7, 1, 100_000),
    backupS3: backupS3Setting(env),
    provider: env.BERTH_PROVIDER || undefined,
    providerEnv: env,
    dnsServers: (env.BERTH_DNS_SERVERS || '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    allowedRegistries: (env.BERTH_ALLOWED_REGISTRIES || '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
    trustProxy: trustProxySetting(env),
    tls: tlsSetting(env),
    acme: acmeSetting(env),
    tlsAcmeName: tlsAcmeNameSetting(env),
    // CAs limit failed validations per name per hour: a failed name waits an hour, then longer.
    acmeRetryBaseMs: intSetting(env, 'BERTH_ACME_RETRY_BASE_MS', 3_600_000, 1_000, 86_400_000),
    // A minute is nothing against a 90-day certificate; CAs with lifetimes of minutes (tests) need less.
    acmeScanMs: intSetting(env, 'BERTH_ACME_SCAN_MS', 60_000, 1_000, 3_600_000),
    rateLimitPerMin: intSetting(env, 'BERTH_RATE_LIMIT_PER_MIN', 1200, 1, 10_000_000),
    // Enough for a misconfigured client to see its 401s; far too few to cost the database anything.
    authFailuresPerMin: intSetting(env, 'BERTH_AUTH_FAILURES_PER_MIN', 60, 1, 10_000_000),
    // A console tab or a CLI follow holds one or two: enough for many at once, far from what it takes
    // to hold a process's memory or connections.
    streamsPerToken: intSetting(env, 'BERTH_STREAMS_PER_TOKEN', 20, 1, 1_000_000),
    streamsPerAccount: intSetting(env, 'BERTH_STREAMS_PER_ACCOUNT', 100, 1, 1_000_000),
    // Bodies are at most 1 MiB: 30 s is ample even on a slow link, and a client trickling bytes
    // cannot hold a connection longer than that.
    requestTimeoutMs,
    headersTimeoutMs,
    // Longer than the 60 s idle timeout of common load balancers, so the balancer closes first.
    keepAliveTimeoutMs: intSetting(env, 'BERTH_KEEP_ALIVE_TIMEOUT_MS', 72_000, 100, 3_600_000),
    // A worker renews its lease every third of this; a job whose lease lapses is run again.
    jobLeaseMs: intSetting(env, 'BERTH_JOB_LEASE_MS', 15_000, 1_000, 3_600_000),
    // Of the 8 slots of berth serve, two stay for other accounts whatever one account queues.
    jobConcurrencyPerAccount: intSetting(env, 'BERTH_JOB_CONCURRENCY_PER_ACCOUNT', 6, 1, 10_000),
    // Deliveries wait on receivers Berth does not control: they never take a deployment's slot, and
    // one account's slow receiver holds at most half of them.
    webhookConcurrency: intSetting(env, 'BERTH_WEBHOOK_CONCURRENCY', 4, 1, 10_000),
    webhookConcurrencyPerAccount: intSetting(env, 'BERTH_WEBHOOK_CONCURRENCY_PER_ACCOUNT', 2, 1, 10_000),
    eventRetentionHours: intSetting(
      env,
      'BERTH_EVENT_RETENTION_HOURS',
      DEFAULT_EVENT_RETENTION_HOURS,
      1,
      24 * 365,
    ),
    metricsRetentionDays: intSetting(env, 'BERTH_METRICS_RETENTION_DAYS', 30, 1, 3650),
    metricsIntervalMs: metricsIntervalSetting(env),
    dependencyBackupIntervalHours: intSetting(env, 'BERTH_DEPENDENCY_BACKUP_INTERVAL_HOURS', 24, 0, 24 * 365),
    dependencyBackupKeep: intSetting(env, 'BERTH_DEPENDENCY_BACKUP_KEEP', 7, 1, 65536),
    webhookAllowPrivate: /^(1|true|yes)$/i.test(env.BERTH_WEBHOOK_ALLOW_PRIVATE ?? ''),
    webhookRetryBaseMs: intSetting(env, 'BERTH_WEBHOOK_RETRY_BASE_MS', 5_000, 1, 3_600_000),
    gitBaseUrl: gitBaseUrlSetting(env),
    smtpUrl: smtpUrlSetting(env.BERTH_SMTP_URL),
    mailFrom: mailFromSetting(env.BERTH_MAIL_FROM),
    // Off unless asked for: hosts that can reach Berth send webhooks instead.
    gitPollIntervalMs: intSetting(env, 'BERTH_GIT_POLL_INTERVAL_MS', 0, 0, 86_400_000),
    logLevel: env.BERTH_LOG_LEVEL || 'info',
    metricsBind: bindSetting(env, 'BERTH_METRICS_BIND'),
  };
}

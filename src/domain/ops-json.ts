/**
 * The service configuration file (ops.json). The spec names its options and their constants but not its
 * schema; docs/ops-json.md documents the shape Berth reads. Unknown keys are kept for later versions.
 * @module
 */
import { isIP } from 'node:net';
import { isCronExpression } from './cron-expression.ts';
import type { FieldError } from './errors.ts';
import { isGitSource, type Source } from './service-fields.ts';
import { isVariableName } from './variable-names.ts';

/**
 * The kinds the hosted platform documents: the one resource type each declares its resources under, and
 * the `$...` attributes a resource of it exports. `$password` is Berth's: the value itself, for clients
 * that cannot read a secret by its reference (`$passwordArn`); s3's `$endpoint`, `$username` (access key id)
 * and `$password` (secret key) are Berth's too, for S3-compatible servers that are not the cloud's. Other kinds and types are an open set:
 * kept as declared and reported; a provider that cannot make them fails the deployment naming them.
 */
export const RESOURCE_KINDS = {
  s3: { type: 'buckets', attributes: ['name', 'arn', 'endpoint', 'username', 'password'] },
  sns: { type: 'topics', attributes: ['name', 'arn'] },
  sqs: { type: 'queues', attributes: ['name', 'arn'] },
  rds: {
    type: 'instances',
    attributes: [
      'name',
      'arn',
      'endpoint',
      'address',
      'port',
      'username',
      'passwordArn',
      'password',
      'dbName',
    ],
  },
  elasticache: { type: 'clusters', attributes: ['name', 'arn', 'endpoint', 'address', 'port'] },
} as const satisfies Record<string, { type: string; attributes: readonly string[] }>;

export type KnownKind = keyof typeof RESOURCE_KINDS;

export function isKnownKind(kind: string): kind is KnownKind {
  return Object.hasOwn(RESOURCE_KINDS, kind);
}

/** The properties of a known kind that are checked (others are kept as declared), and their defaults. */
const PROPERTIES: Partial<Record<KnownKind, Record<string, 'text' | 'count' | 'flag'>>> = {
  rds: {
    engine: 'text',
    version: 'text',
    storage_gb: 'count',
    instance_type: 'text',
    publicly_accessible: 'flag',
    // Berth's own: scheduled backups on or off, and how many completed backups to keep.
    backups: 'flag',
    backup_keep: 'count',
  },
  elasticache: {
    engine: 'text',
    version: 'text',
    instance_type: 'text',
    num_nodes: 'count',
    backups: 'flag',
    backup_keep: 'count',
  },
};
const DEFAULTS: Partial<Record<KnownKind, Record<string, unknown>>> = {
  rds: { engine: 'postgres' },
  elasticache: { engine: 'redis' },
};

/** One resource declared under `dependencies.{kind}.{type}`. */
export interface OpsResource {
  kind: string;
  type: string;
  /** Unique among the resources of one type; with `prefix`, names the resource (a change replaces it). */
  id: string;
  /** Names the resource; the id when not given. */
  prefix: string;
  /** Environment variable name to a `$...` attribute token, as declared. */
  exports: Record<string, string>;
  skip_preview: boolean;
  preview_only: boolean;
  /** Every other key as declared (engine, version, storage_gb, ...): a change updates the resource. */
  properties: Record<string, unknown>;
}

/** GET service's `ops_dependencies` item (the spec's OpsDependency). */
export interface OpsDependency {
  id: string;
  kind: string;
  exports: Record<string, string>;
}

/** `cron.cron_jobs[]`: an HTTP request to `path` on the service's internal address on each tick. */
export interface OpsCronJob {
  schedule: string;
  path: string;
}

export interface HealthCheck {
  type: 'http' | 'tcp' | 'shell' | 'grpc';
  path?: string;
  port?: number;
  command?: string;
  /** Seconds one check may run before it counts as a failure. */
  timeout: number;
}

export interface IngressSettings {
  request_body_size: number;
  proxy_buffer_size: number | null;
  proxy_buffers: number | null;
  send_timeout: number;
  read_timeout: number;
  connection_timeout: number;
  /**
   * Whether plain HTTP to a name with a certificate is redirected (308) to HTTPS. A route stored before
   * this field existed lacks it: readers treat anything but `false` as on.
   */
  https_redirect: boolean;
  /** Strict-Transport-Security max-age in seconds on HTTPS answers; null (or absent, as above) sends none. */
  hsts_max_age: number | null;
}

export interface OpsConfig {
  dependencies: OpsResource[];
  cron_jobs: OpsCronJob[];
  health_check: HealthCheck | null;
  ingress: IngressSettings;
  ip_whitelist: string[];
  /** Minutes a deployment waits for the new version to become ready. */
  deploy_timeout: number;
}

/** The spec's Limits table. */
export const OPS_LIMITS = {
  healthCheckTimeout: { default: 10, min: 1, max: 300 },
  requestBodySizeMb: { default: 30, min: 1, max: 1024 },
  proxyBufferSizeKb: { min: 1, max: 1024 },
  proxyBuffers: { min: 1, max: 256 },
  ingressTimeout: { default: 120, min: 1, max: 3600 },
  connectionTimeout: { default: 10, min: 1, max: 3600 },
  deployTimeoutMin: { default: 5, min: 1, max: 20 },
  // 0 lets a service clear the HSTS browsers kept from it; two years is the longest value browsers' preload lists ask for.
  hstsMaxAge: { min: 0, max: 63_072_000 },
} as const;

export const DEFAULT_OPS_CONFIG: OpsConfig = {
  dependencies: [],
  cron_jobs: [],
  health_check: null,
  ingress: {
    request_body_size: OPS_LIMITS.requestBodySizeMb.default,
    proxy_buffer_size: null,
    proxy_buffers: null,
    send_timeout: OPS_LIMITS.ingressTimeout.default,
    read_timeout: OPS_LIMITS.ingressTimeout.default,
    connection_timeout: OPS_LIMITS.connectionTimeout.default,
    https_redirect: true,
    hsts_max_age: null,
  },
  ip_whitelist: [],
  deploy_timeout: OPS_LIMITS.deployTimeoutMin.default,
};

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** An IPv4 or IPv6 address, optionally with a prefix length that fits it (a bare address is a /32 or /128). */
export function isCidr(value: string): boolean {
  const [address = '', prefix, ...rest] = value.split('/');
  if (rest.length > 0) return false;
  const version = isIP(address);
  if (version === 0) return false;
  if (prefix === undefined) return true;
  const bits = Number(prefix);
  return /^\d{1,3}$/.test(prefix) && bits <= (version === 4 ? 32 : 128);
}

/**
 * Reads ops.json text. `field` is the request field it came from, used as the prefix of error paths;
 * `serviceType`, when known, checks what only some types may declare (cron jobs).
 */
export function parseOpsJson(
  text: string,
  field: string,
  serviceType?: string | null,
): { config: OpsConfig; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const fail = (path: string, error: string) => errors.push({ field: `${field}${path}`, error });
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    fail('', `${field} is not valid JSON`);
    return { config: DEFAULT_OPS_CONFIG, errors };
  }
  if (!isObject(raw)) {
    fail('', `${field} must be a JSON object`);
    return { config: DEFAULT_OPS_CONFIG, errors };
  }

  const whole = (path: string, value: unknown, limits: { min: number; max: number }, unit: string) => {
    if (!Number.isInteger(value) || (value as number) < limits.min || (value as number) > limits.max) {
      fail(path, `${field}${path} must be a whole number of ${unit} from ${limits.min} to ${limits.max}`);
      return undefined;
    }
    return value as number;
  };
  const flag = (path: string, value: unknown) => {
    if (typeof value !== 'boolean') {
      fail(path, `${field}${path} must be true or false`);
      return undefined;
    }
    return value;
  };
  const optional = <T>(obj: Obj, key: string, read: (v: unknown) => T | undefined, fallback: T): T =>
    obj[key] === undefined ? fallback : (read(obj[key]) ?? fallback);

  const config: OpsConfig = structuredClone(DEFAULT_OPS_CONFIG);

  if (raw.dependencies !== undefined) {
    config.dependencies = readDependencies(raw.dependencies, `${field}.dependencies`, errors);
  }
  if (raw.cron !== undefined) {
    config.cron_jobs = readCronJobs(raw.cron, `${field}.cron`, serviceType, errors);
  }

  if (raw.health_check !== undefined) {
    const hc = raw.health_check;
    const path = '.health_check';
    if (!isObject(hc) || !['http', 'tcp', 'shell', 'grpc'].includes(hc.type as string)) {
      fail(path, `${field}${path} must be an object whose type is http, tcp, shell or grpc`);
    } else {
      const check: HealthCheck = {
        type: hc.type as HealthCheck['type'],
        timeout: optional(
          hc,
          'timeout',
          (v) => whole(`${path}.timeout`, v, OPS_LIMITS.healthCheckTimeout, 'seconds'),
          OPS_LIMITS.healthCheckTimeout.default,
        ),
      };
      if (hc.port !== undefined) {
        const port = whole(`${path}.port`, hc.port, { min: 1, max: 65535 }, 'port');
        if (port !== undefined) check.port = port;
      }
      if (check.type === 'http') {
        if (typeof hc.path !== 'string' || !hc.path.startsWith('/') || hc.path.length > 200) {
          fail(
            `${path}.path`,
            `${field}${path}.path must be a path starting with / (at most 200 characters)`,
          );
        } else check.path = hc.path;
      }
      if (check.type === 'shell') {
        if (typeof hc.command !== 'string' || !hc.command.trim() || hc.command.length > 1000) {
          fail(
            `${path}.command`,
            `${field}${path}.command must be a non-empty command (at most 1000 characters)`,
          );
        } else check.command = hc.command;
      }
      config.health_check = check;
    }
  }

  if (raw.ingress !== undefined) {
    const ing = raw.ingress;
    if (!isObject(ing)) fail('.ingress', `${field}.ingress must be an object`);
    else {
      const p = '.ingress';
      config.ingress = {
        request_body_size: optional(
          ing,
          'request_body_size',
          (v) => whole(`${p}.request_body_size`, v, OPS_LIMITS.requestBodySizeMb, 'MB'),
          OPS_LIMITS.requestBodySizeMb.default,
        ),
        proxy_buffer_size: optional<number | null>(
          ing,
          'proxy_buffer_size',
          (v) => whole(`${p}.proxy_buffer_size`, v, OPS_LIMITS.proxyBufferSizeKb, 'KB'),
          null,
        ),
        proxy_buffers: optional<number | null>(
          ing,
          'proxy_buffers',
          (v) => whole(`${p}.proxy_buffers`, v, OPS_LIMITS.proxyBuffers, 'buffers'),
          null,
        ),
        send_timeout: optional(
          ing,
          'send_timeout',
          (v) => whole(`${p}.send_timeout`, v, OPS_LIMITS.ingressTimeout, 'seconds'),
          OPS_LIMITS.ingressTimeout.default,
        ),
        read_timeout: optional(
          ing,
          'read_timeout',
          (v) => whole(`${p}.read_timeout`, v, OPS_LIMITS.ingressTimeout, 'seconds'),
          OPS_LIMITS.ingressTimeout.default,
        ),
        connection_timeout: optional(
          ing,
          'connection_timeout',
          (v) => whole(`${p}.connection_timeout`, v, OPS_LIMITS.connectionTimeout, 'seconds'),
          OPS_LIMITS.connectionTimeout.default,
        ),
        https_redirect: optional(
          ing,
          'https_redirect',
          (v) => flag(`${p}.https_redirect`, v),
          DEFAULT_OPS_CONFIG.ingress.https_redirect,
        ),
        hsts_max_age: optional<number | null>(
          ing,
          'hsts_max_age',
          (v) => (v === null ? null : whole(`${p}.hsts_max_age`, v, OPS_LIMITS.hstsMaxAge, 'seconds')),
          null,
        ),
      };
      if (ing.ip_whitelist !== undefined) {
        const list = ing.ip_whitelist;
        if (!Array.isArray(list) || list.length > 100) {
          fail(`${p}.ip_whitelist`, `${field}${p}.ip_whitelist must be an array of at most 100 CIDRs`);
        } else {
          list.forEach((cidr, i) => {
            if (typeof cidr !== 'string' || !isCidr(cidr)) {
              fail(
                `${p}.ip_whitelist[${i}]`,
                `${field}${p}.ip_whitelist[${i}] must be a CIDR such as 203.0.113.0/24`,
              );
            }
          });
          config.ip_whitelist = list.filter((c): c is string => typeof c === 'string');
        }
      }
    }
  }

  config.deploy_timeout = optional(
    raw,
    'deploy_timeout',
    (v) => whole('.deploy_timeout', v, OPS_LIMITS.deployTimeoutMin, 'minutes'),
    OPS_LIMITS.deployTimeoutMin.default,
  );
  return { config, errors };
}

const ARRAY_FORM_HINT =
  'must be an object of kinds, each listing its resources by type, as in ' +
  '{"s3": {"buckets": [{"id": "files", "prefix": "files", "exports": {"BUCKET_NAME": "$name"}}]}}; ' +
  'the array form [{"id", "kind", "exports"}] is no longer read';

function readDependencies(value: unknown, path: string, errors: FieldError[]): OpsResource[] {
  const fail = (at: string, error: string) => errors.push({ field: at, error: `${at} ${error}` });
  if (!isObject(value)) {
    fail(path, ARRAY_FORM_HINT);
    return [];
  }
  const out: OpsResource[] = [];
  for (const [kind, types] of Object.entries(value)) {
    const kindPath = `${path}.${kind}`;
    if (!kind.trim() || kind.length > 100) {
      fail(kindPath, 'must be named by a kind of 1 to 100 characters');
      continue;
    }
    if (!isObject(types)) {
      const known = isKnownKind(kind) ? ` such as {"${RESOURCE_KINDS[kind].type}": [...]}` : '';
      fail(kindPath, `must be an object listing resources by type${known}`);
      continue;
    }
    for (const [type, list] of Object.entries(types)) {
      const typePath = `${kindPath}.${type}`;
      if (!Array.isArray(list)) {
        fail(typePath, 'must be an array of resources, each an object with an id');
        continue;
      }
      const seen = new Set<string>();
      list.forEach((item, i) => {
        const resource = readResource(kind, type, item, `${typePath}[${i}]`, fail);
        if (!resource) return;
        if (seen.has(resource.id)) {
          fail(
            `${typePath}[${i}].id`,
            `repeats the id ${resource.id}: ids are unique among the ${kind} ${type}`,
          );
          return;
        }
        seen.add(resource.id);
        out.push(resource);
      });
    }
  }
  return out;
}

function readResource(
  kind: string,
  type: string,
  item: unknown,
  at: string,
  fail: (at: string, error: string) => void,
): OpsResource | null {
  if (!isObject(item)) {
    fail(at, 'must be an object with an id and exports');
    return null;
  }
  const { id, prefix, exports, skip_preview, preview_only, ...rest } = item;
  let problems = 0;
  const problem = (path: string, error: string) => {
    problems += 1;
    fail(path, error);
  };
  if (typeof id !== 'string' || !id.trim() || id.length > 100) {
    problem(`${at}.id`, 'must be a non-empty string of at most 100 characters');
  }
  if (prefix !== undefined && (typeof prefix !== 'string' || !prefix.trim() || prefix.length > 100)) {
    problem(`${at}.prefix`, 'must be a non-empty string of at most 100 characters');
  }
  for (const [key, flag] of [
    ['skip_preview', skip_preview],
    ['preview_only', preview_only],
  ] as const) {
    if (flag !== undefined && typeof flag !== 'boolean') problem(`${at}.${key}`, 'must be true or false');
  }
  if (skip_preview === true && preview_only === true) {
    problem(
      `${at}.preview_only`,
      'cannot be true together with skip_preview: the resource would exist nowhere',
    );
  }
  const known = isKnownKind(kind) && RESOURCE_KINDS[kind].type === type ? kind : null;
  const exported: Record<string, string> = {};
  if (exports !== undefined && !isObject(exports)) {
    problem(`${at}.exports`, 'must map environment variable names to $ attribute tokens');
  } else {
    for (const [name, token] of Object.entries(exports ?? {})) {
      const attributes: readonly string[] | null = known ? RESOURCE_KINDS[known].attributes : null;
      const valid =
        isVariableName(name) &&
        typeof token === 'string' &&
        token.startsWith('$') &&
        token.length <= 200 &&
        (attributes === null || attributes.includes(token.slice(1)));
      if (!valid) {
        const tokens = attributes
          ? `one of ${attributes.map((a) => `$${a}`).join(', ')}`
          : 'a $ attribute token';
        problem(`${at}.exports.${name}`, `must name an environment variable and map it to ${tokens}`);
      } else exported[name] = token;
    }
  }
  const checked = known ? (PROPERTIES[known] ?? {}) : {};
  for (const [key, rule] of Object.entries(checked)) {
    const v = rest[key];
    if (v === undefined) continue;
    const ok =
      rule === 'text'
        ? typeof v === 'string' && v.trim() !== '' && v.length <= 100
        : rule === 'count'
          ? Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65536
          : typeof v === 'boolean';
    if (!ok) {
      const expected =
        rule === 'text'
          ? 'a non-empty string of at most 100 characters'
          : rule === 'count'
            ? 'a whole number from 1 to 65536'
            : 'true or false';
      problem(`${at}.${key}`, `must be ${expected}`);
    }
  }
  if (problems > 0) return null;
  return {
    kind,
    type,
    id: id as string,
    prefix: (prefix as string | undefined) ?? (id as string),
    exports: exported,
    skip_preview: skip_preview === true,
    preview_only: preview_only === true,
    properties: { ...(known ? DEFAULTS[known] : undefined), ...rest },
  };
}

function readCronJobs(
  value: unknown,
  path: string,
  serviceType: string | null | undefined,
  errors: FieldError[],
): OpsCronJob[] {
  const fail = (at: string, error: string) => errors.push({ field: at, error: `${at} ${error}` });
  if (!isObject(value)) {
    fail(path, 'must be an object such as {"cron_jobs": [{"schedule": "*/5 * * * *", "path": "/tasks"}]}');
    return [];
  }
  const list = value.cron_jobs;
  if (list === undefined) return [];
  const at = `${path}.cron_jobs`;
  if (!Array.isArray(list) || list.length > 50) {
    fail(at, 'must be an array of at most 50 jobs, each {"schedule", "path"}');
    return [];
  }
  if (list.length > 0 && serviceType != null && serviceType !== 'web' && serviceType !== 'internal') {
    fail(
      at,
      `calls a path on the service's internal address, which only web and internal services have (this one is ${serviceType})`,
    );
    return [];
  }
  const out: OpsCronJob[] = [];
  list.forEach((job, i) => {
    if (!isObject(job)) {
      fail(`${at}[${i}]`, 'must be an object with a schedule and a path');
      return;
    }
    const { schedule, path: target } = job;
    const scheduleOk = typeof schedule === 'string' && schedule.length <= 100 && isCronExpression(schedule);
    const pathOk = typeof target === 'string' && target.startsWith('/') && target.length <= 200;
    if (!scheduleOk) fail(`${at}[${i}].schedule`, 'must be a cron expression such as "*/5 * * * *"');
    if (!pathOk) fail(`${at}[${i}].path`, 'must be a path starting with / (at most 200 characters)');
    if (scheduleOk && pathOk) out.push({ schedule, path: target });
  });
  return out;
}

/** GET service's `ops_dependencies`: each declared resource as the spec's OpsDependency. */
export function opsDependencies(config: OpsConfig): OpsDependency[] {
  return config.dependencies.map(({ id, kind, exports }) => ({ id, kind, exports }));
}

/** The ops.json a service declares inline (already validated when stored); defaults when it has none. */
export function opsConfigOf(service: { ops_json: string | null }): OpsConfig {
  return service.ops_json ? parseOpsJson(service.ops_json, 'ops_json').config : DEFAULT_OPS_CONFIG;
}

/**
 * What GET service reports a service declares: its inline ops_json, else (a git service) the config
 * its newest started deployment read from the repository.
 */
export function declaredOpsOf(service: {
  ops_json: string | null;
  repo_ops: string | null;
  source: Source;
}): OpsConfig {
  if (service.ops_json || !service.repo_ops || !isGitSource(service.source)) return opsConfigOf(service);
  return JSON.parse(service.repo_ops) as OpsConfig;
}

/**
 * The service configuration file (ops.json). The spec names its options and their constants but not its
 * schema; docs/ops-json.md documents the shape Berth reads. Unknown keys are kept for later versions.
 * @module
 */
import { isIP } from 'node:net';
import type { FieldError } from './errors.ts';
import { isVariableName } from './variable-names.ts';

export interface OpsDependency {
  id: string;
  kind: string;
  exports: Record<string, string>;
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
}

export interface OpsConfig {
  dependencies: OpsDependency[];
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
} as const;

export const DEFAULT_OPS_CONFIG: OpsConfig = {
  dependencies: [],
  health_check: null,
  ingress: {
    request_body_size: OPS_LIMITS.requestBodySizeMb.default,
    proxy_buffer_size: null,
    proxy_buffers: null,
    send_timeout: OPS_LIMITS.ingressTimeout.default,
    read_timeout: OPS_LIMITS.ingressTimeout.default,
    connection_timeout: OPS_LIMITS.connectionTimeout.default,
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

/** Reads ops.json text. `field` is the request field it came from, used as the prefix of error paths. */
export function parseOpsJson(text: string, field: string): { config: OpsConfig; errors: FieldError[] } {
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
  const optional = <T>(obj: Obj, key: string, read: (v: unknown) => T | undefined, fallback: T): T =>
    obj[key] === undefined ? fallback : (read(obj[key]) ?? fallback);

  const config: OpsConfig = structuredClone(DEFAULT_OPS_CONFIG);

  if (raw.dependencies !== undefined) {
    if (!Array.isArray(raw.dependencies)) fail('.dependencies', `${field}.dependencies must be an array`);
    else config.dependencies = readDependencies(raw.dependencies, `${field}.dependencies`, errors);
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

function readDependencies(list: unknown[], path: string, errors: FieldError[]): OpsDependency[] {
  const out: OpsDependency[] = [];
  const seen = new Set<string>();
  list.forEach((item, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(item)) {
      errors.push({ field: at, error: `${at} must be an object with id, kind and exports` });
      return;
    }
    const { id, kind, exports } = item;
    if (typeof id !== 'string' || !id.trim() || id.length > 100) {
      errors.push({
        field: `${at}.id`,
        error: `${at}.id must be a non-empty string of at most 100 characters`,
      });
      return;
    }
    if (seen.has(id)) {
      errors.push({ field: `${at}.id`, error: `${at}.id repeats the id ${id}` });
      return;
    }
    seen.add(id);
    // `kind` is an open set: any non-empty name is accepted and reported as declared.
    if (typeof kind !== 'string' || !kind.trim() || kind.length > 100) {
      errors.push({
        field: `${at}.kind`,
        error: `${at}.kind must be a non-empty string of at most 100 characters`,
      });
      return;
    }
    const exp: [string, string][] = [];
    if (exports !== undefined) {
      if (!isObject(exports)) {
        errors.push({ field: `${at}.exports`, error: `${at}.exports must map variable names to $ tokens` });
        return;
      }
      for (const [name, token] of Object.entries(exports)) {
        if (!isVariableName(name) || typeof token !== 'string' || !token.startsWith('$')) {
          errors.push({
            field: `${at}.exports.${name}`,
            error: `${at}.exports.${name} must name an environment variable and map it to a $ token`,
          });
          return;
        }
        exp.push([name, token]);
      }
    }
    out.push({ id, kind, exports: Object.fromEntries(exp) });
  });
  return out;
}

/** The ops.json a service declares inline (already validated when stored); defaults when it has none. */
export function opsConfigOf(service: { ops_json: string | null }): OpsConfig {
  return service.ops_json ? parseOpsJson(service.ops_json, 'ops_json').config : DEFAULT_OPS_CONFIG;
}

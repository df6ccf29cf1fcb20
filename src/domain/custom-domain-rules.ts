/**
 * Custom domain names and the DNS records a caller must create for one. Pure: the tokens and the
 * environment's identity come in, the records go out, the same on every read.
 * @module
 */
import { isIP } from 'node:net';
import type { FieldError } from './errors.ts';
import type { ServiceType } from './service-fields.ts';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** The lower-cased domain, or the field error that says what is wrong with it. */
export function checkDomainName(input: unknown): { domain: string } | { error: FieldError } {
  const fail = (error: string) => ({ error: { field: 'domain', error } });
  if (typeof input !== 'string') return fail('domain must be a string');
  const domain = input.trim().toLowerCase().replace(/\.$/, '');
  if (!domain) return fail('domain is a required field');
  if (domain.length > 253) return fail('domain must be at most 253 characters');
  if (isIP(domain) !== 0 || /^[\d.]+$/.test(domain))
    return fail('domain must be a domain name, not an IP address');
  if (domain.includes('*')) return fail('domain cannot be a wildcard');
  const labels = domain.split('.');
  if (labels.length < 2) return fail('domain must be a fully qualified domain name such as app.example.com');
  for (const label of labels) {
    if (label.length > 63)
      return fail(`domain has a label longer than 63 characters (${label.slice(0, 20)}...)`);
    if (!LABEL.test(label)) {
      return fail(
        `domain has an invalid label "${label}": labels hold letters, digits and hyphens, and neither start nor end with a hyphen`,
      );
    }
  }
  return { domain };
}

/**
 * The service types that can have a custom domain: those the ingress routes public traffic to. An
 * `internal` service is reachable only inside its environment; workers, jobs and crons serve nothing.
 */
export const DOMAIN_SERVICE_TYPES: readonly ServiceType[] = ['web'];

/**
 * A PATCH that makes a service with a custom domain a type no domain fits is refused, not carried out
 * by retiring the domain: a registration is the account's claim on the name (freed once retired, for
 * anyone to take), and the API cannot delete a domain yet. `held` is a domain the service holds.
 */
export function checkTypeKeepsDomain(type: string | null, held: string | null): FieldError | null {
  if (held === null || DOMAIN_SERVICE_TYPES.includes(type as ServiceType)) return null;
  return {
    field: 'type',
    error: `type must stay ${DOMAIN_SERVICE_TYPES.join(' or ')} while the service has the custom domain ${held}`,
  };
}

export function checkDomainServiceType(type: string | null): FieldError | null {
  if (DOMAIN_SERVICE_TYPES.includes(type as ServiceType)) return null;
  const kind = type ? `${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type} service` : 'a service without a type';
  return {
    field: 'domain',
    error: `domain can only be added to ${DOMAIN_SERVICE_TYPES.join(' or ')} services, and this is ${kind}`,
  };
}

export interface DnsRecordSpec {
  purpose: 'verify_acm' | 'route_app_traffic';
  record_name: string;
  record_type: 'CNAME' | 'A';
  record_value: string;
}

export interface RecordInputs {
  domain: string;
  verifyToken: string;
  validationToken: string;
  cloud: 'aws' | 'gcp';
  /** The environment's ingress: a host name on AWS, an address on GCP. */
  ingressHost: string;
  /** Where certificate validation records point. */
  validationZone: string;
}

export function dnsRecordsFor(input: RecordInputs): DnsRecordSpec[] {
  return [
    {
      purpose: 'verify_acm',
      record_name: `_${input.verifyToken}.${input.domain}`,
      record_type: 'CNAME',
      record_value: `_${input.validationToken}.${input.validationZone}`,
    },
    {
      purpose: 'route_app_traffic',
      record_name: input.domain,
      record_type: input.cloud === 'gcp' ? 'A' : 'CNAME',
      record_value: input.ingressHost,
    },
  ];
}

/** DNS names compare case-insensitively, with or without the root's trailing dot. */
export function sameDnsName(a: string, b: string): boolean {
  return a.toLowerCase().replace(/\.$/, '') === b.toLowerCase().replace(/\.$/, '');
}

/** The field error for a record whose lookup found `found` (empty: nothing), or null when it matches. */
export function checkRecord(record: DnsRecordSpec, found: string[]): FieldError | null {
  if (found.some((value) => sameDnsName(value, record.record_value))) return null;
  const seen = found.length > 0 ? `found ${found.join(', ')}` : 'found no record';
  return {
    field: record.record_name,
    error: `expected ${record.record_type} ${record.record_name} -> ${record.record_value}; ${seen}`,
  };
}

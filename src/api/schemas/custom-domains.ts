import { Type } from 'typebox';
import { CUSTOM_DOMAIN_STATES } from '../../domain/custom-domain-states.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

export const DnsRecord = Type.Object({
  purpose: Type.String({ maxLength: 40, description: 'verify_acm or route_app_traffic' }),
  record_name: Type.String({ maxLength: 300 }),
  record_type: Type.String({ maxLength: 10, description: 'CNAME, or A for route_app_traffic on GCP' }),
  record_value: Type.String({ maxLength: 300 }),
  created_at: DateTime,
});

export const CERTIFICATE_STATUSES = ['pending', 'issued', 'failed', 'renewing'] as const;

/** The domain's TLS certificate, as Berth's ingress serves it (docs/https.md). */
export const Certificate = Type.Object(
  {
    status: StringEnum(CERTIFICATE_STATUSES, {
      maxLength: 20,
      description:
        '`pending`: ordered, not issued yet (the domain is served over HTTP meanwhile); `issued`: served over ' +
        'HTTPS; `failed`: the order failed (`last_error` says why), tried again later; `renewing`: a renewal is ' +
        'under way or failed, and the current certificate still serves.',
    }),
    issuer: Nullable(Type.String({ maxLength: 1000, description: "The issuing CA's name (X.509 issuer)" })),
    not_before: Nullable(DateTime),
    not_after: Nullable(DateTime),
    renew_after: Nullable(DateTime),
    last_error: Nullable(
      Type.String({
        maxLength: 2000,
        description: "The CA's reason for the last failed order, and what to fix",
      }),
    ),
  },
  {
    description:
      'Null when this server orders no certificates (ACME is off) or the domain is not verified yet.',
  },
);

export const CustomDomain = Type.Object({
  id: Uuid,
  account_id: Uuid,
  private_instance_id: Uuid,
  service_id: Uuid,
  prov_custom_domain_id: Type.String({ maxLength: 200 }),
  domain: Type.String({ maxLength: 253 }),
  origin: Type.String({ maxLength: 300 }),
  state: StringEnum(CUSTOM_DOMAIN_STATES, { maxLength: 30 }),
  dns_records: Type.Array(DnsRecord),
  certificate: Nullable(Certificate),
  created_at: DateTime,
  updated_at: DateTime,
});

/** The custom domain embedded in a service: the active one. */
export const CustomDomainSummary = Type.Object({
  id: Uuid,
  domain: Type.String({ maxLength: 253 }),
  origin: Type.String({ maxLength: 300 }),
  state: StringEnum(CUSTOM_DOMAIN_STATES, { maxLength: 30 }),
});

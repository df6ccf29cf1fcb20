import { Type } from 'typebox';
import { CUSTOM_DOMAIN_STATES } from '../../domain/custom-domain-states.ts';
import { DateTime, StringEnum, Uuid } from './common.ts';

export const DnsRecord = Type.Object({
  purpose: Type.String({ maxLength: 40, description: 'verify_acm or route_app_traffic' }),
  record_name: Type.String({ maxLength: 300 }),
  record_type: Type.String({ maxLength: 10, description: 'CNAME, or A for route_app_traffic on GCP' }),
  record_value: Type.String({ maxLength: 300 }),
  created_at: DateTime,
});

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

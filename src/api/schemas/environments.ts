import { Type } from 'typebox';
import { CLOUDS, ENVIRONMENT_STATES } from '../../domain/environment-states.ts';
import { DateTime, StringEnum, Uuid } from './common.ts';

export const Environment = Type.Object({
  id: Uuid,
  name: Type.String({ maxLength: 100 }),
  account_id: Uuid,
  cloud: StringEnum(CLOUDS),
  region: Type.String({ maxLength: 50 }),
  state: StringEnum(ENVIRONMENT_STATES),
  created_at: DateTime,
  updated_at: DateTime,
});

/** An environment with its network identity, read live from the provider. */
export const LiveEnvironment = Type.Object({
  ...Environment.properties,
  ingress_host: Type.String({ maxLength: 300, description: 'CNAME target on AWS; A record address on GCP' }),
  public_nat_ips: Type.Array(Type.String({ maxLength: 50 }), {
    description: 'egress addresses to allowlist',
  }),
  svc_role_arn: Type.String({ maxLength: 300, description: 'the role that pods assume' }),
});

/**
 * The simulated cloud's resources (ops.json dependencies): s3 buckets, sns topics, sqs queues, rds
 * instances and elasticache clusters with stable, realistic attributes (names from the prefix, ARNs in
 * the environment's region and account, endpoints and ports). Other kinds and types are refused by name.
 * @module
 */
import { createHash, randomBytes } from 'node:crypto';
import type { OpsResource } from '../../domain/ops-json.ts';
import { resourceName } from '../../domain/resource-names.ts';
import type { EnvironmentRef, ServiceRef } from '../provider.ts';
import { simAccountNumber } from './identity.ts';

const hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** Steps of BERTH_SIM_STEP_MS each kind takes to make: databases and caches take longer, as they do. */
export const SIM_RESOURCE_STEPS: Record<string, number> = {
  's3.buckets': 1,
  'sns.topics': 1,
  'sqs.queues': 1,
  'rds.instances': 3,
  'elasticache.clusters': 2,
};

/** The attributes of a simulated resource, stable for the same service, resource and environment. */
export function simAttributes(
  env: EnvironmentRef,
  service: ServiceRef,
  resource: OpsResource,
): { attributes: Record<string, string>; password?: string } {
  const name = resourceName(service.id, resource);
  const { region } = env;
  const account = simAccountNumber(env);
  const tag = hex(name).slice(0, 12);
  switch (`${resource.kind}.${resource.type}`) {
    case 's3.buckets':
      return {
        attributes: { name, arn: `arn:aws:s3:::${name}`, endpoint: `https://s3.${region}.amazonaws.com` },
      };
    case 'sns.topics':
      return { attributes: { name, arn: `arn:aws:sns:${region}:${account}:${name}` } };
    case 'sqs.queues':
      return { attributes: { name, arn: `arn:aws:sqs:${region}:${account}:${name}` } };
    case 'rds.instances': {
      const mysql = /mysql|maria/.test(String(resource.properties.engine));
      const address = `${name}.c${tag}.${region}.rds.amazonaws.com`;
      const port = mysql ? '3306' : '5432';
      return {
        attributes: {
          name,
          arn: `arn:aws:rds:${region}:${account}:db:${name}`,
          address,
          port,
          endpoint: `${address}:${port}`,
          username: 'berth_admin',
          dbName: name.replace(/-/g, '_'),
          passwordArn: `arn:aws:secretsmanager:${region}:${account}:secret:rds!db-${tag.slice(0, 8)}-${tag.slice(8)}`,
        },
        password: randomBytes(18).toString('base64url'),
      };
    }
    case 'elasticache.clusters': {
      const address = `${name}.${tag.slice(0, 6)}.ng.0001.${region}.cache.amazonaws.com`;
      return {
        attributes: {
          name,
          arn: `arn:aws:elasticache:${region}:${account}:replicationgroup:${name}`,
          address,
          port: '6379',
          endpoint: `${address}:6379`,
        },
      };
    }
    default:
      return { attributes: {} };
  }
}

/**
 * What an ops.json dependency is on the Engine-API drivers (docker, swarm), whichever runs it: which
 * engine image serves a kind and type (rds postgres and mysql as MariaDB, elasticache redis, s3 buckets
 * as s3rver), what the image is told (its variables, data directory, port) and the `$...` attributes
 * Berth resolves exports to. sns and sqs have no honest local equivalent: they fail by name. The images'
 * contract is in docs/docker-provider.md.
 * @module
 */
import type { OpsResource } from '../../domain/ops-json.ts';
import { resourceName } from '../../domain/resource-names.ts';
import { TerminalError } from '../../jobs/errors.ts';
import type { EnvironmentRef, ServiceRef } from '../provider.ts';
import { LABEL } from './labels.ts';
import type { DockerSettings } from './settings.ts';

export type EngineName = keyof DockerSettings['dependencyImages'];

/** What Berth tells an image and what it reads back: its port, data directory and variables. */
export interface Engine {
  name: EngineName;
  port: number;
  dataDir: string;
  /** The container's variable holding the generated password (none: the engine has no password). */
  passwordVariable?: string;
  environment(name: string, password: string): Record<string, string>;
}

/** The user rds instances are made with (the hosted platform's master user is a fixed name too). */
const DB_USER = 'berth_admin';
const dbNameOf = (name: string) => name.replace(/-/g, '_');

const accessKeyIdOf = (name: string) => `BERTH${name.slice(-8).toUpperCase()}`;

const ENGINES: Record<EngineName, Engine> = {
  postgres: {
    name: 'postgres',
    port: 5432,
    dataDir: '/var/lib/postgresql/data',
    passwordVariable: 'POSTGRES_PASSWORD',
    environment: (name, password) => ({
      POSTGRES_USER: DB_USER,
      POSTGRES_PASSWORD: password,
      POSTGRES_DB: dbNameOf(name),
    }),
  },
  mariadb: {
    name: 'mariadb',
    port: 3306,
    dataDir: '/var/lib/mysql',
    passwordVariable: 'MARIADB_PASSWORD',
    environment: (name, password) => ({
      MARIADB_USER: DB_USER,
      MARIADB_PASSWORD: password,
      MARIADB_DATABASE: dbNameOf(name),
      // The official image wants a root password decided; nobody needs to know it.
      MARIADB_RANDOM_ROOT_PASSWORD: '1',
    }),
  },
  redis: { name: 'redis', port: 6379, dataDir: '/data', environment: () => ({}) },
  s3: {
    name: 's3',
    port: 4568,
    dataDir: '/data',
    passwordVariable: 'S3_SECRET_ACCESS_KEY',
    environment: (name, password) => ({
      S3_BUCKET: name,
      S3_ACCESS_KEY_ID: accessKeyIdOf(name),
      S3_SECRET_ACCESS_KEY: password,
    }),
  },
};

/**
 * The engine's variables with the password in a file instead (`<VARIABLE>_FILE`, the official images'
 * convention): for engines whose orchestrator mounts secrets as files (swarm secrets).
 */
export function environmentWithPasswordFile(
  engine: Engine,
  name: string,
  passwordFile: string,
): Record<string, string> {
  const variables = engine.environment(name, '');
  if (!engine.passwordVariable) return variables;
  delete variables[engine.passwordVariable];
  return { ...variables, [`${engine.passwordVariable}_FILE`]: passwordFile };
}

/** rds engines by the names the hosted platform accepts; elasticache's. Others fail naming them. */
const RDS_ENGINES: Record<string, EngineName> = {
  postgres: 'postgres',
  'aurora-postgresql': 'postgres',
  mysql: 'mariadb',
  mariadb: 'mariadb',
  'aurora-mysql': 'mariadb',
};
const CACHE_ENGINES: Record<string, EngineName> = { redis: 'redis', valkey: 'redis' };
/** The resource types whose `engine` property picks the engine. */
const ENGINE_CHOICES: Record<string, Record<string, EngineName>> = {
  'rds.instances': RDS_ENGINES,
  'elasticache.clusters': CACHE_ENGINES,
};

/** How long a new dependency has to accept connections (a first MariaDB start initialises its data). */
export const READY_TIMEOUT_MS = 180_000;

/** The engine that runs a resource on `provider`, or a TerminalError naming what it cannot run. */
export function engineOf(
  resource: Pick<OpsResource, 'kind' | 'type' | 'properties'>,
  provider: 'docker' | 'swarm',
): Engine {
  const key = `${resource.kind}.${resource.type}`;
  const declared = String(resource.properties.engine ?? '');
  const engines = ENGINE_CHOICES[key];
  if (engines) {
    const name = engines[declared];
    if (!name)
      throw new TerminalError(
        `the ${provider} provider runs ${resource.kind} engines ${Object.keys(engines).join(', ')}, not "${declared}"`,
      );
    return ENGINES[name];
  }
  switch (key) {
    case 's3.buckets':
      return ENGINES.s3;
    case 'sns.topics':
    case 'sqs.queues':
      throw new TerminalError(
        `${resource.kind} is not available on the ${provider} provider: no local ${resource.kind.toUpperCase()} ` +
          'runs here that would behave like the real one. Deploy on a provider that has it, or remove it from ops.json',
      );
    default:
      throw new TerminalError(`the ${provider} provider cannot provision ${resource.kind} ${resource.type}`);
  }
}

/** The `$...` attributes of a dependency named `name` (also its address on the environment's network). */
export function attributesOf(
  env: EnvironmentRef,
  resource: Pick<OpsResource, 'kind' | 'type'>,
  name: string,
  engine: Engine,
): Record<string, string> {
  const arn = (service: string, path: string) =>
    `arn:berth:${service}:${env.region}:${env.account_id}:${path}`;
  const address = name;
  const port = String(engine.port);
  switch (resource.kind) {
    case 's3':
      return {
        name,
        arn: `arn:berth:s3:::${name}`,
        endpoint: `http://${address}:${port}`,
        username: accessKeyIdOf(name),
      };
    case 'rds':
      return {
        name,
        arn: arn('rds', `db:${name}`),
        address,
        port,
        endpoint: `${address}:${port}`,
        username: DB_USER,
        dbName: dbNameOf(name),
        passwordArn: arn('secretsmanager', `secret:${name}/password`),
      };
    default:
      return {
        name,
        arn: arn('elasticache', `replicationgroup:${name}`),
        address,
        port,
        endpoint: `${address}:${port}`,
      };
  }
}

/** The name of a dependency's copy made to inspect a backup (a restore into a new one). */
export const copyNameOf = (name: string) => `${name}-restore`;

/** The container (docker) or swarm service that runs a dependency, and its volume. */
export const dependencyNameOf = (name: string) => `berth-dep-${name}`;

/** A declared dependency as a driver makes it: its engine, its name, and what runs it. */
export function dependencyOf(
  service: ServiceRef,
  resource: OpsResource,
  provider: 'docker' | 'swarm',
): { engine: Engine; name: string; runName: string } {
  const name = resourceName(service.id, resource);
  return { engine: engineOf(resource, provider), name, runName: dependencyNameOf(name) };
}

/** What a dependency's container or service and its volume carry (never `berth.service`: see labels.ts). */
export function dependencyLabels(
  environment: EnvironmentRef,
  service: ServiceRef,
  resource: Pick<OpsResource, 'kind' | 'type' | 'id'>,
  engine: Engine,
): Record<string, string> {
  return {
    [LABEL.managed]: 'true',
    [LABEL.account]: environment.account_id,
    [LABEL.environment]: environment.id,
    [LABEL.dependencyOf]: service.id,
    [LABEL.dependency]: `${resource.kind}.${resource.type}.${resource.id}`,
    [LABEL.engine]: engine.name,
  };
}

/** The setting that names an engine's image. */
export const imageSettingOf = (engine: Engine) => `BERTH_DOCKER_${engine.name.toUpperCase()}_IMAGE`;

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TerminalError } from '../../jobs/errors.ts';
import { engineOf, environmentWithPasswordFile } from './dependency-engines.ts';

const resource = (kind: string, type: string, engine?: string) => ({
  kind,
  type,
  properties: engine ? { engine } : {},
});

test('sns, sqs and unknown engines fail for good, naming the kind or engine and the provider', () => {
  for (const provider of ['docker', 'swarm'] as const) {
    assert.throws(
      () => engineOf(resource('sqs', 'queues'), provider),
      (error: Error) =>
        error instanceof TerminalError &&
        error.message.startsWith(`sqs is not available on the ${provider} provider`),
    );
    assert.throws(
      () => engineOf(resource('rds', 'instances', 'oracle-ee'), provider),
      new RegExp(`the ${provider} provider runs rds engines postgres, .* not "oracle-ee"`),
    );
  }
  assert.equal(engineOf(resource('rds', 'instances', 'aurora-mysql'), 'swarm').name, 'mariadb');
  assert.equal(engineOf(resource('elasticache', 'clusters', 'valkey'), 'swarm').name, 'redis');
});

test('an engine told its password in a file gets <VARIABLE>_FILE and not the password variable', () => {
  const postgres = engineOf(resource('rds', 'instances', 'postgres'), 'swarm');
  assert.deepEqual(environmentWithPasswordFile(postgres, 'userdata-1a2b3c4d', '/run/secrets/p'), {
    POSTGRES_USER: 'berth_admin',
    POSTGRES_DB: 'userdata_1a2b3c4d',
    POSTGRES_PASSWORD_FILE: '/run/secrets/p',
  });
  const s3 = engineOf(resource('s3', 'buckets'), 'swarm');
  const variables = environmentWithPasswordFile(s3, 'files-1a2b3c4d', '/run/secrets/s');
  assert.equal(variables.S3_SECRET_ACCESS_KEY_FILE, '/run/secrets/s');
  assert.equal('S3_SECRET_ACCESS_KEY' in variables, false);
  // An engine without a password (redis) is told the same as on docker.
  const redis = engineOf(resource('elasticache', 'clusters', 'redis'), 'swarm');
  assert.deepEqual(environmentWithPasswordFile(redis, 'cache-1a2b3c4d', '/run/secrets/r'), {});
});

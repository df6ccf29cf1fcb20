import assert from 'node:assert/strict';
import { test } from 'node:test';
import { instanceMemoryBytes } from './instance-memory.ts';

const GIB = 1024 ** 3;

test('rds classes have the memory the cloud lists: t by size, m 8 GiB per large, r twice that', () => {
  assert.equal(instanceMemoryBytes('rds', 'db.t4g.micro'), 1 * GIB);
  assert.equal(instanceMemoryBytes('rds', 'db.t3.small'), 2 * GIB);
  assert.equal(instanceMemoryBytes('rds', 'db.m6g.large'), 8 * GIB);
  assert.equal(instanceMemoryBytes('rds', 'db.m5.4xlarge'), 64 * GIB);
  assert.equal(instanceMemoryBytes('rds', 'db.r6i.xlarge'), 32 * GIB);
  assert.equal(instanceMemoryBytes('rds', 'db.r7g.24xlarge'), 768 * GIB);
});

test('elasticache node types have their listed memory', () => {
  assert.equal(instanceMemoryBytes('elasticache', 'cache.t4g.micro'), 0.5 * GIB);
  assert.equal(instanceMemoryBytes('elasticache', 'cache.t3.small'), Math.round(1.37 * GIB));
  assert.equal(instanceMemoryBytes('elasticache', 'cache.r6g.large'), Math.round(13.07 * GIB));
});

test('a class it does not know, or one of the other kind, has none', () => {
  for (const [kind, type] of [
    ['rds', 'cache.t4g.micro'],
    ['elasticache', 'db.t4g.micro'],
    ['rds', 'db.x2g.large'],
    ['rds', 'db.m6g.metal'],
    ['rds', 'db.t4g.4xlarge'],
    ['rds', 'small'],
    ['s3', 'db.t4g.micro'],
    ['rds', 42],
    ['rds', undefined],
  ] as const) {
    assert.equal(instanceMemoryBytes(kind, type), null, `${kind} ${String(type)}`);
  }
});

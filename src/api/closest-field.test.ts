import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closestField } from './closest-field.ts';

const DEPLOY = [
  'commit_id',
  'docker_image_tag',
  'helm_chart_version',
  'note',
  'preview',
  'branch',
  'pr_number',
];
const SECRET = ['key', 'value', 'description', 'use_preview', 'is_sensitive', 'chart_default_val'];
const CREATE = ['name', 'type', 'source', 'port', 'replica_count', 'deploy_now', 'docker_image', 'secrets'];

test('a misspelled field is matched to the field it most likely meant', () => {
  assert.equal(closestField('tag', DEPLOY), 'docker_image_tag');
  assert.equal(closestField('commit', DEPLOY), 'commit_id');
  assert.equal(closestField('val', SECRET), 'value');
  assert.equal(closestField('Key', SECRET), 'key');
  assert.equal(closestField('sensitive', SECRET), 'is_sensitive');
  assert.equal(closestField('deploynow', CREATE), 'deploy_now');
  assert.equal(closestField('deploy-now', CREATE), 'deploy_now');
  assert.equal(closestField('replicas', CREATE), 'replica_count');
  assert.equal(closestField('tpye', CREATE), 'type');
  assert.equal(closestField('secret', CREATE), 'secrets');
});

test('a field close to nothing gets no suggestion', () => {
  assert.equal(closestField('colour', CREATE), null);
  assert.equal(closestField('id', CREATE), null);
  assert.equal(closestField('x', CREATE), null);
  assert.equal(closestField('environment', DEPLOY), null);
});

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { effectiveSecrets } from '../../src/domain/usecases/secrets.ts';
import { startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/** Secret keys become environment variables, so a key must be one (docs/api.md, Secrets). */
const h = await startHarness();
after(() => h.close());
const t = await h.tenant();
const RULE =
  'must be an environment variable name: letters, digits and underscores, not starting with a digit';

const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
  token: t.token,
  body: VALID_SERVICE.docker,
});
const serviceId: string = created.body.data.service.id;
const serviceUrl = `/v1/environments/${t.envId}/services/${serviceId}/secrets`;
const envUrl = `/v1/environments/${t.envId}/secrets`;

describe('secret keys that cannot be environment variable names are refused', () => {
  for (const [what, url] of [
    ['service secrets', serviceUrl],
    ['environment secrets', envUrl],
  ] as const) {
    test(`${what}: A=B and MY-KEY are field errors, and nothing is written`, async () => {
      const res = await h.request('PUT', url, {
        token: t.token,
        body: {
          secrets: [
            { key: 'GOOD', value: '1' },
            { key: 'A=B', value: 'x' },
            { key: 'MY-KEY', value: 'y' },
          ],
        },
      });
      assert.equal(res.status, 422, res.raw);
      assert.deepEqual(res.body, {
        error_code: 'validation',
        message: 'Invalid data',
        errors: [
          { field: 'secrets[1].key', error: `secrets[1].key ${RULE}` },
          { field: 'secrets[2].key', error: `secrets[2].key ${RULE}` },
        ],
      });
      const read = await h.request('GET', url, { token: t.token });
      assert.deepEqual(read.body.data.secrets, []);
    });
  }

  test('create service: a bad key in secrets is a field error and no service is created', async () => {
    const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: { ...VALID_SERVICE.docker, name: 'Other App', secrets: [{ key: '1ST', value: 'x' }] },
    });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors, [{ field: 'secrets[0].key', error: `secrets[0].key ${RULE}` }]);
    const list = await h.request('GET', `/v1/environments/${t.envId}/services`, { token: t.token });
    assert.deepEqual(
      list.body.data.services.map((s: { name: string }) => s.name),
      ['Web App'],
    );
  });
});

test('__proto__ is a valid name and reaches the runtime like any other key', async () => {
  const env = await h.request('PUT', envUrl, {
    token: t.token,
    body: { secrets: [{ key: 'constructor', value: 'env' }] },
  });
  assert.equal(env.status, 200, env.raw);
  const res = await h.request('PUT', serviceUrl, {
    token: t.token,
    body: {
      secrets: [
        { key: '__proto__', value: 'kept' },
        { key: 'PLAIN', value: 'p' },
      ],
    },
  });
  assert.equal(res.status, 200, res.raw);
  const variables = await effectiveSecrets(h.deps.store.db, h.deps.secretBox, t.envId, serviceId);
  assert.deepEqual(Object.entries(variables).sort(), [
    ['PLAIN', 'p'],
    ['__proto__', 'kept'],
    ['constructor', 'env'],
  ]);
  assert.equal(Object.getPrototypeOf(variables), Object.prototype);
});

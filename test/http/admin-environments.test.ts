import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Harness, startHarness } from '../helpers/harness.ts';

/** The admin API's environment create: the region must be one its cloud has. */
let h: Harness;
let accountId: string;
before(async () => {
  h = await startHarness();
  const account = await h.admin('POST', '/accounts', { name: 'regions', plan: 'pro' });
  accountId = account.body.data.account.id;
});
after(() => h.close());

const create = (body: Record<string, unknown>) =>
  h.admin('POST', `/accounts/${accountId}/environments`, body);

test('a region its cloud does not have is a 422 field error naming the allowed ones; nothing is created', async () => {
  for (const [cloud, region] of [
    ['aws', 'mars-north-1'],
    ['aws', 'us-central1'],
    ['gcp', 'us-east-1'],
    [undefined, 'Not a region'],
  ] as const) {
    const res = await create({ name: 'staging', ...(cloud ? { cloud } : {}), region });
    assert.equal(res.status, 422, res.raw);
    assert.equal(res.body.error_code, 'validation');
    const [error] = res.body.errors;
    assert.equal(error.field, 'region');
    const allowed = cloud === 'gcp' ? 'europe-west1' : 'eu-west-1';
    assert.match(
      error.error,
      new RegExp(`^region must be one of the ${cloud ?? 'aws'} regions: .*${allowed}`),
    );
  }
  const listed = await h.admin('GET', `/accounts/${accountId}/environments`);
  assert.deepEqual(listed.body.data.environments, []);
});

test("a region of the cloud is taken; without one, the cloud's default", async () => {
  for (const [body, region] of [
    [{ cloud: 'gcp', region: 'europe-west1' }, 'europe-west1'],
    [{ region: 'eu-central-1' }, 'eu-central-1'],
    [{ cloud: 'gcp' }, 'us-central1'],
    [{}, 'us-east-1'],
  ] as const) {
    const res = await create({ name: 'staging', ...body });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.environment.region, region);
  }
});

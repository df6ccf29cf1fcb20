import { test } from 'node:test';
import { startHarness, VALID_SERVICE } from './helpers/harness.ts';

test('dbg', async () => {
  const h = await startHarness({ logLevel: 'error' });
  const t = await h.tenant();
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker },
  });
  const url = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
  const d = await h.request('POST', `${url}/deploy`, { token: t.token, body: {} });
  console.log(d.raw);
  const r = await h.request('GET', `/v1/deployments/${d.body.data.deployment_id}/logs`, { token: t.token });
  console.log(r.raw);
  await h.close();
});

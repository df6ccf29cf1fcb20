import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { editSecrets } from '../../src/cli/dev/secrets.ts';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

let h: Harness;
let t: Tenant;
let serviceId: string;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  serviceId = created.body.data.service.id;
});
after(() => h.close());

const secretsUrl = () => `/v1/environments/${t.envId}/services/${serviceId}/secrets`;
const serviceUrl = () => `/v1/environments/${t.envId}/services/${serviceId}`;

async function etagOfGet(url: string): Promise<string> {
  const res = await h.request('GET', url, { token: t.token });
  assert.equal(res.status, 200);
  return String(res.headers.etag);
}

function assertPreconditionFailed(res: { status: number; body: { error_code: string; errors: unknown } }) {
  assert.equal(res.status, 412, JSON.stringify(res.body));
  assert.equal(res.body.error_code, 'conflict');
  assert.equal(res.body.errors, null);
}

describe('If-Match on PUT secrets', () => {
  for (const scope of ['service', 'environment'] as const) {
    test(`${scope} secrets: the ETag just read is accepted; once they changed, 412 conflict and nothing written`, async () => {
      const url = scope === 'service' ? secretsUrl() : `/v1/environments/${t.envId}/secrets`;
      const put = (secrets: unknown[], ifMatch?: string) =>
        h.request('PUT', url, {
          token: t.token,
          body: { secrets },
          headers: ifMatch === undefined ? {} : { 'if-match': ifMatch },
        });
      assert.equal((await put([{ key: 'A', value: '1' }])).status, 200, 'without If-Match: unconditional');
      const read = await etagOfGet(url);
      assert.equal(
        (
          await put(
            [
              { key: 'A', value: '1' },
              { key: 'B', value: '2' },
            ],
            read,
          )
        ).status,
        200,
      );
      assertPreconditionFailed(await put([{ key: 'C', value: '3' }], read));
      assertPreconditionFailed(await put([{ key: 'C', value: '3' }], `W/${await etagOfGet(url)}`));
      const now = await h.request('GET', url, { token: t.token });
      assert.deepEqual(
        now.body.data.secrets.map((s: { key: string }) => s.key),
        ['A', 'B'],
      );
      assert.equal((await put([{ key: 'A', value: '1' }], '*')).status, 200, 'If-Match: * matches any');
    });
  }

  test('If-Match on PUT secrets is in the OpenAPI document, with the 412', async () => {
    const doc = (await h.request('GET', '/v1/openapi.json')).body;
    const op = doc.paths['/v1/environments/{envId}/services/{serviceId}/secrets'].put;
    assert.ok(
      op.parameters.some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'if-match'),
    );
    assert.ok(op.responses['412']);
  });
});

describe('If-Match on PATCH service', () => {
  test('the ETag of GET service is accepted; once the service changed, 412 and no change', async () => {
    const read = await etagOfGet(serviceUrl());
    const patch = (body: unknown, ifMatch: string) =>
      h.request('PATCH', serviceUrl(), { token: t.token, body, headers: { 'if-match': ifMatch } });
    const first = await patch({ replica_count: 3 }, read);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assertPreconditionFailed(await patch({ replica_count: 5 }, read));
    const now = await h.request('GET', serviceUrl(), { token: t.token });
    assert.equal(now.body.data.service.replica_count, 3);
    assert.equal((await patch({ replica_count: 4 }, String(now.headers.etag))).status, 200);
  });
});

/** The typed client, speaking to the app through inject. */
function client() {
  return createClient({
    baseUrl: 'http://berth.test',
    token: t.token,
    fetch: (async (request: Request) => {
      const url = new URL(request.url);
      const res = await h.app.inject({
        method: request.method as 'GET',
        url: url.pathname + url.search,
        headers: Object.fromEntries(request.headers),
        payload: request.body ? Buffer.from(await request.arrayBuffer()) : undefined,
      });
      const headers = new Headers();
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, String(v));
      return new Response(res.statusCode === 304 ? null : res.rawPayload, {
        status: res.statusCode,
        headers,
      });
    }) as typeof fetch,
  });
}

test('berth secrets set: a writer that changed the secrets between the read and the write costs a retry, not a key', async () => {
  const path = { envId: t.envId, serviceId };
  await h.request('PUT', secretsUrl(), { token: t.token, body: { secrets: [{ key: 'KEEP', value: 'k' }] } });
  let edits = 0;
  const stored = await editSecrets(client(), path, (current) => {
    edits++;
    return [...current, { key: 'FIRST', value: '1' }];
  });
  assert.equal(edits, 1);
  assert.deepEqual(
    stored.map((s) => s.key),
    ['FIRST', 'KEEP'],
  );

  // Set X; between its read and its write, another `secrets set` (of Y) runs to completion.
  edits = 0;
  const result = await editSecrets(client(), path, async (current) => {
    edits++;
    if (edits === 1) await editSecrets(client(), path, (seen) => [...seen, { key: 'Y', value: 'y' }]);
    return [...current, { key: 'X', value: 'x' }];
  });
  assert.equal(
    edits,
    2,
    'the first write of X met the change of Y (412), so the edit was redone on top of it',
  );
  assert.deepEqual(
    result.map((s) => s.key),
    ['FIRST', 'KEEP', 'X', 'Y'],
  );
  assert.deepEqual(
    (await unwrapSecrets()).map((s) => s.key),
    ['FIRST', 'KEEP', 'X', 'Y'],
  );
});

async function unwrapSecrets() {
  return unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path: { envId: t.envId, serviceId } },
    }),
  ).secrets;
}

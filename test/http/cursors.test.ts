import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Every paginated list decodes its cursor at the edge: a cursor it did not hand out, even one that
 * decodes to "date|uuid" with an impossible date, is a 422 on field `cursor`, never a database error.
 */
let h: Harness;
let t: Tenant;
let lists: string[];
before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000 });
  t = await h.tenant();
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const services = `/v1/environments/${t.envId}/services`;
  const service = `${services}/${created.body.data.service.id}`;
  // Two of everything, so that every list has a second page.
  const second = await h.request('POST', services, { token: t.token, body: VALID_SERVICE.helm });
  assert.equal(second.status, 200, JSON.stringify(second.body));
  for (let i = 0; i < 2; i++) {
    const deployed = await h.request('POST', `${service}/deploy`, { token: t.token, body: {} });
    assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
  }
  lists = [services, `${service}/deployments`, '/v1/audit-logs'];
});
after(() => h.close());

const b64 = (text: string) => Buffer.from(text).toString('base64url');
const id = randomUUID();

const BAD_CURSORS = [
  b64(`2024-02-30T00:00:00.000Z|${id}`),
  b64(`2023-02-29T12:00:00.000Z|${id}`),
  b64(`2024-13-01T00:00:00.000Z|${id}`),
  b64(`2024-01-01T24:00:00.000Z|${id}`),
  b64(`2024-01-01T23:59:60.000Z|${id}`),
  b64(`2024-01-01T00:00:00.000Z|${id}|extra`),
  b64(`2024-01-01T00:00:00.000Z|not-a-uuid`),
  b64(`1|${id}`),
  b64('garbage'),
  'not-a-cursor',
  '%%%',
];

test('every paginated list answers a bad cursor with 422 on field cursor', async () => {
  assert.equal(lists.length, 3);
  for (const url of lists) {
    for (const cursor of BAD_CURSORS) {
      const res = await h.request('GET', `${url}?cursor=${encodeURIComponent(cursor)}`, { token: t.token });
      assert.equal(res.status, 422, `${url} ${cursor}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(res.body, {
        error_code: 'validation',
        message: 'Invalid data',
        errors: [{ field: 'cursor', error: 'cursor must be a next_cursor returned by this endpoint' }],
      });
    }
  }
});

test('a well-formed cursor of a real instant pages from there, on every list', async () => {
  for (const url of lists) {
    const past = b64(`2000-02-29T00:00:00.000Z|${id}`);
    const res = await h.request('GET', `${url}?cursor=${past}`, { token: t.token });
    assert.equal(res.status, 200, `${url}: ${JSON.stringify(res.body)}`);
    const [items] = Object.values(res.body.data).filter(Array.isArray);
    assert.deepEqual(items, [], 'nothing is older than 2000');
    assert.equal(res.body.data.next_cursor, null);
  }
});

test("every list's next_cursor is accepted back", async () => {
  for (const url of lists) {
    const first = await h.request('GET', `${url}?limit=1`, { token: t.token });
    assert.equal(first.status, 200);
    const cursor = first.body.data.next_cursor;
    assert.equal(typeof cursor, 'string', `${url} has a second page`);
    const next = await h.request('GET', `${url}?limit=1&cursor=${cursor}`, { token: t.token });
    assert.equal(next.status, 200, `${url}: ${JSON.stringify(next.body)}`);
    const [a, b] = [first, next].map((r) => Object.values(r.body.data).filter(Array.isArray)[0]?.[0]);
    assert.notEqual(a?.id, b?.id, `${url}: the second page starts after the first`);
  }
});

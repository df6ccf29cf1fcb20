import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/** The log lines the app wrote, parsed. */
const lines: Array<Record<string, unknown>> = [];
const logTo = { write: (line: string) => void lines.push(JSON.parse(line)) };

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ logLevel: 'info' }, logTo);
  t = await h.tenant();
});
after(() => h.close());

const accessLines = (reqId: string) => lines.filter((l) => l.msg === 'request' && l.reqId === reqId);

describe('the access log', () => {
  test('one line per request once it is answered: method, url, status, ms and the request id', async () => {
    const url = `/v1/environments/${t.envId}`;
    const ok = await h.request('GET', url, { token: t.token, headers: { 'x-request-id': 'log-ok-1' } });
    assert.equal(ok.status, 200);
    const missing = await h.request('GET', '/v1/nothing', { headers: { 'x-request-id': 'log-404-1' } });
    assert.equal(missing.status, 404);
    const [line] = accessLines('log-ok-1');
    assert.equal(accessLines('log-ok-1').length, 1);
    assert.equal(line?.method, 'GET');
    assert.equal(line?.url, url);
    assert.equal(line?.status, 200);
    assert.equal(line?.level, 30);
    assert.equal(typeof line?.ms, 'number');
    assert.deepEqual(
      accessLines('log-404-1').map((l) => [l.url, l.status]),
      [['/v1/nothing', 404]],
    );
  });

  test('a poll answered from the read cache is logged like any other request', async () => {
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: VALID_SERVICE.docker,
    });
    const url = `/v1/environments/${t.envId}/services/${created.body.data.service.id}`;
    for (const id of ['log-poll-1', 'log-poll-2']) {
      const res = await h.request('GET', url, { token: t.token, headers: { 'x-request-id': id } });
      assert.equal(res.status, 200);
    }
    assert.equal(h.app.readCache.size > 0, true);
    for (const id of ['log-poll-1', 'log-poll-2']) {
      assert.deepEqual(
        accessLines(id).map((l) => [l.url, l.status]),
        [[url, 200]],
      );
    }
  });
});

describe('errors', () => {
  test("a business rule answered 500 validation is the client's mistake: logged as info, not as an error", async () => {
    const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: { ...VALID_SERVICE.github, ops_json: '{}' },
      headers: { 'x-request-id': 'log-rule-1' },
    });
    assert.equal(res.status, 500, res.raw);
    assert.equal(res.body.error_code, 'validation');
    const mine = lines.filter((l) => l.reqId === 'log-rule-1');
    assert.deepEqual(
      mine.filter((l) => (l.level as number) >= 40),
      [],
    );
    assert.ok(
      mine.some((l) => l.msg === 'Ops Json is only supported for docker image source' && l.level === 30),
    );
  });
});

describe('below info', () => {
  test('no access line is written, and a request that logs nothing costs no line at all', async () => {
    const quiet: unknown[] = [];
    const q = await startHarness({ logLevel: 'warn' }, { write: (line: string) => void quiet.push(line) });
    try {
      const tenant = await q.tenant();
      const res = await q.request('GET', `/v1/environments/${tenant.envId}`, { token: tenant.token });
      assert.equal(res.status, 200);
      assert.deepEqual(quiet, []);
    } finally {
      await q.close();
    }
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { hashSecret } from '../../src/domain/passwords.ts';
import { type Harness, type Reply, startHarness, type Tenant } from '../helpers/harness.ts';

/**
 * `berth login` by the OAuth 2.0 Device Authorization Grant (RFC 8628, docs/access.md): the two public
 * endpoints as the RFC says, and approval by a signed-in person (issue 28, item 6), on either database.
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000, trustProxy: ['127.0.0.1'] });
  t = await h.tenant();
});
after(() => h.close());

const PASSWORD = 'correct horse battery';
const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** Each device login from an address of its own: starts are limited per address. */
function from(address = `10.7.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`) {
  return { 'x-forwarded-for': address };
}

/** A signed-in member of the tenant's account: its cookie and CSRF token. */
async function person(role: string) {
  const email = `${randomUUID()}@example.com`;
  const user = await h.admin('POST', '/users', { email, display_name: 'Ada' });
  const userId = user.body.data.user.id as string;
  await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role });
  const link = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/sign-in-links`);
  const res = await h.request('POST', '/auth/sign-in-link', {
    body: { token: link.body.data.token, password: PASSWORD },
    headers: from(),
  });
  assert.equal(res.status, 200, res.raw);
  const cookie = String([res.headers['set-cookie']].flat()[0]).split(';')[0] as string;
  return { email, userId, headers: { cookie, 'x-csrf-token': res.body.data.csrf_token as string } };
}

async function start(body: Record<string, unknown> = { client_id: 'berth-cli', device_name: 'ada-laptop' }) {
  const res = await h.request('POST', '/auth/device/code', { body, headers: from() });
  assert.equal(res.status, 200, res.raw);
  return res.body as {
    device_code: string;
    user_code: string;
    verification_uri: string;
    verification_uri_complete: string;
    expires_in: number;
    interval: number;
  };
}

function poll(deviceCode: string, extra: Record<string, string> = {}): Promise<Reply> {
  return h.request('POST', '/auth/device/token', {
    rawBody: new URLSearchParams({
      grant_type: GRANT,
      device_code: deviceCode,
      client_id: 'berth-cli',
      ...extra,
    }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...from() },
  });
}

/** As if the client had waited its interval since its last poll (no test sleeps 5 seconds). */
async function waitedInterval(): Promise<void> {
  await h.deps.store.db
    .updateTable('device_logins')
    .set({ last_polled_at: new Date(0) })
    .execute();
}

function decide(userCode: string, action: 'approve' | 'deny', headers: Record<string, string>) {
  return h.request('POST', `/v1/device-logins/${userCode}/${action}`, { headers });
}

describe('the device authorization endpoint (RFC 8628 §3.2)', () => {
  test('answers the codes, the verification URI with and without the code, the expiry and the interval', async () => {
    const codes = await start();
    assert.match(codes.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    assert.ok(codes.device_code.length >= 43);
    assert.equal(codes.verification_uri, 'http://localhost:80/device');
    assert.equal(codes.verification_uri_complete, `http://localhost:80/device?user_code=${codes.user_code}`);
    assert.equal(codes.expires_in, 600);
    assert.equal(codes.interval, 5);
  });

  test('stores both codes hashed, never as given', async () => {
    const codes = await start();
    const rows = await h.deps.store.db.selectFrom('device_logins').selectAll().execute();
    const dump = JSON.stringify(rows);
    assert.equal(dump.includes(codes.device_code), false);
    assert.equal(dump.includes(codes.user_code.replace('-', '')), false);
    assert.ok(rows.some((r) => r.device_code_hash === hashSecret(codes.device_code)));
    assert.ok(rows.some((r) => r.user_code_hash === hashSecret(codes.user_code.replace('-', ''))));
  });

  test('reads form-encoded bodies as the RFC sends them; a field sent twice is invalid_request', async () => {
    const form = await h.request('POST', '/auth/device/code', {
      rawBody: 'client_id=berth-cli&device_name=form%20box',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...from() },
    });
    assert.equal(form.status, 200, form.raw);
    const twice = await h.request('POST', '/auth/device/code', {
      rawBody: 'client_id=a&client_id=b',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...from() },
    });
    assert.equal(twice.status, 400, twice.raw);
    assert.equal(twice.body.error, 'invalid_request');
    assert.match(twice.body.error_description, /client_id must be given once/);
    const missing = await h.request('POST', '/auth/device/code', { body: {}, headers: from() });
    assert.deepEqual(Object.keys(missing.body).sort(), ['error', 'error_description']);
    assert.equal(missing.body.error, 'invalid_request');
  });

  test('one address starting too many is told to slow down (429, Retry-After)', async () => {
    const headers = from('10.99.0.1');
    let res: Reply | undefined;
    for (let i = 0; i < 21; i++) {
      res = await h.request('POST', '/auth/device/code', { body: { client_id: 'flood' }, headers });
    }
    assert.equal(res?.status, 429, res?.raw);
    assert.equal(res?.body.error, 'slow_down');
    assert.ok(Number(res?.headers['retry-after']) >= 1);
  });
});

describe('polling (RFC 8628 §3.5)', () => {
  test('authorization_pending, then slow_down (and 5 seconds more) when polled sooner than the interval', async () => {
    const codes = await start();
    const first = await poll(codes.device_code);
    assert.equal(first.status, 400, first.raw);
    assert.deepEqual(first.body, {
      error: 'authorization_pending',
      error_description: 'Waiting for someone to approve the code in the console',
    });
    assert.equal(first.headers['cache-control'], 'no-store');
    const soon = await poll(codes.device_code);
    assert.equal(soon.body.error, 'slow_down');
    assert.match(soon.body.error_description, /wait 10 seconds/);
    const sooner = await poll(codes.device_code);
    assert.match(sooner.body.error_description, /wait 15 seconds/, 'for this and every later poll');
    const row = await h.deps.store.db
      .selectFrom('device_logins')
      .select('interval_s')
      .where('device_code_hash', '=', hashSecret(codes.device_code))
      .executeTakeFirstOrThrow();
    assert.equal(row.interval_s, 15, 'kept in the database: every process sees it');
  });

  test('approved: the token of the person who approved, with their role, once; then invalid_grant', async () => {
    const ada = await person('developer');
    const codes = await start();
    assert.equal((await poll(codes.device_code)).body.error, 'authorization_pending');
    const seen = await h.request('GET', `/v1/device-logins/${codes.user_code.toLowerCase()}`, {
      headers: ada.headers,
    });
    assert.equal(seen.status, 200, seen.raw);
    assert.equal(seen.body.data.device_login.device_name, 'ada-laptop');
    assert.equal(seen.body.data.device_login.client_id, 'berth-cli');
    assert.match(seen.body.data.device_login.client_address, /^10\.7\./, 'the address the client asked from');
    const approved = await decide(codes.user_code, 'approve', ada.headers);
    assert.equal(approved.status, 200, approved.raw);
    assert.equal(approved.body.data.device_login.state, 'approved');
    assert.equal(approved.raw.includes(codes.device_code), false);
    // Approved: handed over at once, however soon after the last poll.
    const got = await poll(codes.device_code);
    assert.equal(got.status, 200, got.raw);
    assert.equal(got.body.token_type, 'Bearer');
    assert.equal(got.body.role, 'developer');
    assert.equal(got.body.email, ada.email);
    assert.equal(got.headers['cache-control'], 'no-store');
    const token = got.body.access_token as string;
    const envs = await h.request('GET', '/v1/environments', { token });
    assert.equal(envs.status, 200, envs.raw);
    const again = await poll(codes.device_code);
    assert.equal(again.status, 400);
    assert.equal(again.body.error, 'invalid_grant');
    // Listed with the operator's token, named after the machine, owned by the person, revocable.
    const list = await h.request('GET', '/v1/tokens', { token: t.token });
    const listed = list.body.data.tokens.find((x: { id: string }) => x.id === got.body.token_id);
    assert.equal(listed.name, 'berth login on ada-laptop');
    assert.equal(listed.role, 'developer');
    assert.equal(listed.owner.email, ada.email);
    assert.equal(list.raw.includes(token), false);
    const revoked = await h.request('DELETE', `/v1/tokens/${got.body.token_id}`, { token: t.token });
    assert.equal(revoked.status, 200, revoked.raw);
    assert.equal((await h.request('GET', '/v1/environments', { token })).status, 401);
    // The approval is audited, naming the person.
    const audit = await h.request('GET', '/v1/audit-logs?action=device_login.approve', { token: t.token });
    const entry = audit.body.data.audit_logs[0];
    assert.equal(entry.user_email, ada.email);
    assert.equal(entry.resource_type, 'device_login');
  });

  test('denied: access_denied, and the code cannot be approved afterwards', async () => {
    const ada = await person('viewer');
    const codes = await start();
    const denied = await decide(codes.user_code, 'deny', ada.headers);
    assert.equal(denied.status, 200, denied.raw);
    assert.equal(denied.body.data.device_login.state, 'denied');
    const res = await poll(codes.device_code);
    assert.equal(res.body.error, 'access_denied');
    assert.equal((await decide(codes.user_code, 'approve', ada.headers)).status, 404);
    const audit = await h.request('GET', '/v1/audit-logs?action=device_login.deny', { token: t.token });
    assert.equal(audit.body.data.audit_logs[0].user_email, ada.email);
  });

  test('expired: expired_token, and the code is gone from the console', async () => {
    const ada = await person('viewer');
    const codes = await start();
    await h.deps.store.db
      .updateTable('device_logins')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('device_code_hash', '=', hashSecret(codes.device_code))
      .execute();
    await waitedInterval();
    assert.equal((await poll(codes.device_code)).body.error, 'expired_token');
    const seen = await h.request('GET', `/v1/device-logins/${codes.user_code}`, { headers: ada.headers });
    assert.equal(seen.status, 404, seen.raw);
    assert.equal((await decide(codes.user_code, 'approve', ada.headers)).status, 404);
  });

  test('an unknown device code, another client id and another grant type are refused as the RFC says', async () => {
    const codes = await start();
    assert.equal((await poll('not-a-device-code')).body.error, 'invalid_grant');
    assert.equal((await poll(codes.device_code, { client_id: 'other-cli' })).body.error, 'invalid_grant');
    const grant = await poll(codes.device_code, { grant_type: 'authorization_code' });
    assert.equal(grant.status, 400);
    assert.equal(grant.body.error, 'unsupported_grant_type');
  });

  test('a member removed after approving: the client is denied, no token is made', async () => {
    const ada = await person('developer');
    const codes = await start();
    assert.equal((await decide(codes.user_code, 'approve', ada.headers)).status, 200);
    await h.admin('DELETE', `/accounts/${t.accountId}/members/${ada.userId}`);
    assert.equal((await poll(codes.device_code)).body.error, 'access_denied');
  });
});

describe('approving in the console', () => {
  test('needs a person signed in: an API token is refused, and a write needs the CSRF token', async () => {
    const codes = await start();
    const byToken = await h.request('POST', `/v1/device-logins/${codes.user_code}/approve`, {
      token: t.token,
    });
    assert.equal(byToken.status, 403, byToken.raw);
    assert.match(byToken.body.message, /needs a person signed in/);
    const ada = await person('viewer');
    const noCsrf = await decide(codes.user_code, 'approve', { cookie: ada.headers.cookie });
    assert.equal(noCsrf.status, 403, noCsrf.raw);
    assert.match(noCsrf.body.message, /CSRF/);
    assert.equal((await poll(codes.device_code)).body.error, 'authorization_pending');
  });

  test('a viewer approves too: the token acts as a viewer', async () => {
    const bo = await person('viewer');
    const codes = await start({ client_id: 'berth-cli' });
    assert.equal((await decide(codes.user_code, 'approve', bo.headers)).status, 200);
    const got = await poll(codes.device_code);
    assert.equal(got.body.role, 'viewer');
    const list = await h.request('GET', '/v1/tokens', { token: t.token });
    const listed = list.body.data.tokens.find((x: { id: string }) => x.id === got.body.token_id);
    assert.equal(listed.name, 'berth login on an unnamed device');
    const write = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: got.body.access_token,
      body: {},
    });
    assert.equal(write.status, 403, write.raw);
  });

  test('guessing codes is limited per session (429 after 10 unknown codes a minute)', async () => {
    const eve = await person('viewer');
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await h.request('GET', '/v1/device-logins/BCDF-GHJK', { headers: eve.headers })).status);
    }
    assert.deepEqual(statuses, [...Array(10).fill(404), 429]);
  });

  test('/device takes the browser to the console page, with the code', async () => {
    const res = await h.request('GET', '/device?user_code=BCDF-GHJK');
    assert.equal(res.status, 302);
    assert.equal(res.headers.location, '/#/device?user_code=BCDF-GHJK');
    const odd = await h.request('GET', '/device?user_code=%0d%0aX:1');
    assert.equal(odd.headers.location, '/#/device');
  });
});

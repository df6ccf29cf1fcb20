import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../src/api/app.ts';
import { ADMIN_TOKEN, type Harness, type Reply, startHarness, type Tenant } from '../helpers/harness.ts';
import { startOidcProvider, type TestProvider } from '../helpers/oidc-provider.ts';

/**
 * OpenID Connect single sign-on (docs/sso.md) against a real provider (oidc-provider) on loopback: the
 * owner's settings, a sign-in making a member with the default role, the domain rule, and callbacks with
 * a wrong state, nonce, issuer or audience refused and audited.
 */
const HOST = 'berth.test';
let h: Harness;
let t: Tenant;
let idp: TestProvider;
let domain: string;

before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000, authFailuresPerMin: 10_000 });
  t = await h.tenant();
  idp = await startOidcProvider([`http://${HOST}/sso/${t.accountId}/callback`]);
  // A domain of this run's own: other files' accounts never take it.
  domain = `${randomUUID().slice(0, 8)}.example.org`;
  const set = await settings(t.token, {
    issuer_url: idp.issuer,
    client_id: idp.clientId,
    client_secret: idp.clientSecret,
    allowed_domains: [domain],
    default_role: 'developer',
    enabled: true,
  });
  assert.equal(set.status, 200, set.raw);
});
after(async () => {
  await idp?.close();
  await h?.close();
});

function settings(token: string, body: unknown) {
  return h.request('PUT', '/v1/sso', { token, body, headers: { host: HOST } });
}

/** Starts a sign-in as a browser would: the provider's URL, and the cookie the callback needs. */
async function begin(email: string) {
  const res = await h.request('POST', '/auth/sso/start', { body: { email }, headers: { host: HOST } });
  assert.equal(res.status, 200, res.raw);
  const cookie = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_sso='));
  assert.ok(cookie, 'the flow cookie was set');
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /Path=\/auth\/sso/);
  return { url: res.body.data.authorization_url as string, cookie: cookie.split(';')[0] as string };
}

/** The console's callback page: the provider's answer handed to the API. */
function finish(back: URL, cookie: string | null, change: Record<string, string> = {}): Promise<Reply> {
  const body: Record<string, string> = { account_id: t.accountId };
  for (const name of ['state', 'code', 'iss', 'error', 'error_description']) {
    const value = back.searchParams.get(name);
    if (value !== null) body[name] = value;
  }
  return h.request('POST', '/auth/sso/callback', {
    body: { ...body, ...change },
    headers: { host: HOST, ...(cookie ? { cookie } : {}) },
  });
}

/** The whole way: start, the provider's page, and back. */
async function signIn(email: string, login = email, change: Record<string, string> = {}) {
  const started = await begin(email);
  const back = await idp.signIn(started.url, login);
  assert.equal(back.pathname, `/sso/${t.accountId}/callback`);
  return finish(back, started.cookie, change);
}

async function audited(action: string): Promise<Record<string, unknown>[]> {
  const res = await h.request('GET', `/v1/audit-logs?action=${action}`, { token: t.token });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.audit_logs;
}

function sessionCookie(res: Reply): string {
  const set = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_session='));
  assert.ok(set, 'a session cookie was set');
  return set.split(';')[0] as string;
}

describe('settings', () => {
  test('owners read them without the client secret, which is stored sealed', async () => {
    const res = await h.request('GET', '/v1/sso', { token: t.token, headers: { host: HOST } });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(
      { ...res.body.data.sso, updated_at: undefined },
      {
        issuer_url: idp.issuer,
        client_id: idp.clientId,
        client_secret_set: true,
        allowed_domains: [domain],
        default_role: 'developer',
        enabled: true,
        updated_at: undefined,
        redirect_uri: `http://${HOST}/sso/${t.accountId}/callback`,
        sign_in_url: `http://${HOST}/#/sign-in?account=${t.accountId}`,
      },
    );
    assert.equal(res.raw.includes(idp.clientSecret), false);
    const row = await h.deps.store.db
      .selectFrom('sso_configs')
      .selectAll()
      .where('account_id', '=', t.accountId)
      .executeTakeFirstOrThrow();
    assert.match(row.client_secret_sealed, /^v1:/);
    assert.equal(row.client_secret_sealed.includes(idp.clientSecret), false);
    assert.equal(h.deps.secretBox.open(row.client_secret_sealed), idp.clientSecret);
  });

  test('a change without a client secret keeps the stored one', async () => {
    const before = await h.deps.store.db
      .selectFrom('sso_configs')
      .selectAll()
      .where('account_id', '=', t.accountId)
      .executeTakeFirstOrThrow();
    const res = await settings(t.token, {
      issuer_url: idp.issuer,
      client_id: idp.clientId,
      allowed_domains: [domain.toUpperCase()],
      default_role: 'developer',
      enabled: true,
    });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.data.sso.allowed_domains, [domain]);
    const now = await h.deps.store.db
      .selectFrom('sso_configs')
      .selectAll()
      .where('account_id', '=', t.accountId)
      .executeTakeFirstOrThrow();
    assert.equal(now.client_secret_sealed, before.client_secret_sealed);
    assert.equal((await audited('sso.update')).length >= 2, true);
  });

  test('bad settings are field errors', async () => {
    const other = await h.tenant();
    const res = await settings(other.token, {
      issuer_url: 'http://idp.example.com',
      client_id: 'berth',
      allowed_domains: ['not a domain'],
      default_role: 'owner',
      enabled: true,
    });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field).sort(), [
      'allowed_domains[0]',
      'client_secret',
      'default_role',
      'issuer_url',
    ]);
    assert.equal((await h.request('GET', '/v1/sso', { token: other.token })).status, 404);
  });

  test('only owners manage them', async () => {
    const made = await h.request('POST', '/v1/tokens', {
      token: t.token,
      body: { name: 'ci', role: 'admin' },
    });
    assert.equal(made.status, 200, made.raw);
    const res = await h.request('GET', '/v1/sso', { token: made.body.data.token.token });
    assert.equal(res.status, 403, res.raw);
    assert.match(res.body.message, /needs the owner role/);
  });
});

describe('signing in', () => {
  test('a new person becomes a member with the default role, and the session works', async () => {
    const email = `ada-${randomUUID().slice(0, 6)}@${domain}`;
    idp.users.set(email, { email, email_verified: true, name: 'Ada Lovelace' });
    const res = await signIn(email);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.role, 'developer');
    assert.equal(res.body.data.account_id, t.accountId);
    assert.equal(res.body.data.user.email, email);
    const cleared = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_sso='));
    assert.match(cleared ?? '', /Max-Age=0/, 'the flow cookie is cleared');
    const user = await h.deps.store.db
      .selectFrom('users')
      .selectAll()
      .where('email', '=', email)
      .executeTakeFirstOrThrow();
    assert.equal(user.display_name, 'Ada Lovelace');
    assert.equal(user.password_hash, null);
    const envs = await h.request('GET', '/v1/environments', { headers: { cookie: sessionCookie(res) } });
    assert.equal(envs.status, 200, envs.raw);
    const joined = await audited('member.join_sso');
    assert.ok(joined.some((a) => a.user_email === email && a.resource_id === user.id));
    assert.ok((await audited('session.sign_in_sso')).some((a) => a.user_email === email));
    // The second time, the member signs in as they are.
    const again = await signIn(email);
    assert.equal(again.status, 200, again.raw);
    assert.equal((await audited('member.join_sso')).filter((a) => a.user_email === email).length, 1);
  });

  test('another Berth process takes the callback: the sign-in under way is in the database', async () => {
    const email = `elsewhere-${randomUUID().slice(0, 6)}@${domain}`;
    const started = await begin(email);
    const back = await idp.signIn(started.url, email);
    const other = await buildApp(h.deps, { adminToken: ADMIN_TOKEN });
    try {
      const res = await other.inject({
        method: 'POST',
        url: '/auth/sso/callback',
        headers: { host: HOST, cookie: started.cookie, 'content-type': 'application/json' },
        payload: JSON.stringify({
          account_id: t.accountId,
          code: back.searchParams.get('code'),
          state: back.searchParams.get('state'),
          iss: back.searchParams.get('iss'),
        }),
      });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().data.user.email, email);
    } finally {
      await other.close();
    }
  });

  test('an existing member keeps their role', async () => {
    const email = `vi-${randomUUID().slice(0, 6)}@${domain}`;
    const user = await h.admin('POST', '/users', { email, display_name: 'Vi' });
    const userId = user.body.data.user.id as string;
    assert.equal(
      (await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role: 'viewer' })).status,
      200,
    );
    const res = await signIn(email);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.role, 'viewer');
    assert.equal(res.body.data.user.id, userId);
  });

  test('a domain no account signs in with single sign-on is not found', async () => {
    const res = await h.request('POST', '/auth/sso/start', { body: { email: 'ada@elsewhere.example.net' } });
    assert.equal(res.status, 404, res.raw);
    assert.match(res.body.message, /elsewhere\.example\.net/);
  });

  test('an email the provider vouches for outside the allowed domains is refused and audited', async () => {
    const login = `mallory-${randomUUID().slice(0, 6)}`;
    idp.users.set(login, { email: `${login}@elsewhere.example.net`, email_verified: true });
    const res = await signIn(`${login}@${domain}`, login);
    assert.equal(res.status, 403, res.raw);
    assert.match(res.body.message, /email domain is not one this account signs in/);
    assert.equal(res.headers['set-cookie']?.toString().includes('berth_session='), false);
    const entries = await audited('sso.refused_domain');
    assert.ok(
      entries.some((a) => a.user_email === `${login}@elsewhere.example.net` && a.actor === 'Single sign-on'),
    );
    assert.equal(
      (
        await h.deps.store.db
          .selectFrom('users')
          .select('id')
          .where('email', '=', `${login}@elsewhere.example.net`)
          .execute()
      ).length,
      0,
    );
  });

  test('an email the provider has not verified is refused and audited', async () => {
    const email = `unverified-${randomUUID().slice(0, 6)}@${domain}`;
    idp.users.set(email, { email, email_verified: false });
    const res = await signIn(email);
    assert.equal(res.status, 401, res.raw);
    assert.match(res.body.message, /not verified your email/);
    assert.ok((await audited('sso.refused_email')).some((a) => a.user_email === email));
  });

  test('a disabled configuration signs nobody in', async () => {
    const other = await h.tenant();
    const otherDomain = `${randomUUID().slice(0, 8)}.example.org`;
    const set = await settings(other.token, {
      issuer_url: idp.issuer,
      client_id: idp.clientId,
      client_secret: idp.clientSecret,
      allowed_domains: [otherDomain],
      default_role: 'viewer',
      enabled: false,
    });
    assert.equal(set.status, 200, set.raw);
    const res = await h.request('POST', '/auth/sso/start', { body: { email: `ada@${otherDomain}` } });
    assert.equal(res.status, 404, res.raw);
  });
});

describe('refused callbacks are audited', () => {
  async function refused(action: string, res: Reply, message: RegExp) {
    assert.equal(res.status, 401, res.raw);
    assert.match(res.body.message, message);
    assert.match(res.body.message, /start again from the sign-in page/);
    assert.equal(res.headers['set-cookie']?.toString().includes('berth_session='), false);
    const entries = await audited(action);
    assert.ok(
      entries.some((a) => a.actor === 'Single sign-on' && a.resource_type === 'sso'),
      action,
    );
  }

  test('a wrong state', async () => {
    const email = `state-${randomUUID().slice(0, 6)}@${domain}`;
    const before = (await audited('sso.refused_state')).length;
    const res = await signIn(email, email, { state: 'not-the-state' });
    await refused('sso.refused_state', res, /unknown, used already, expired/);
    assert.equal((await audited('sso.refused_state')).length, before + 1);
  });

  test('a state used twice', async () => {
    const email = `twice-${randomUUID().slice(0, 6)}@${domain}`;
    const started = await begin(email);
    const back = await idp.signIn(started.url, email);
    assert.equal((await finish(back, started.cookie)).status, 200);
    await refused('sso.refused_state', await finish(back, started.cookie), /used already/);
  });

  test('an expired state', async () => {
    const email = `late-${randomUUID().slice(0, 6)}@${domain}`;
    const started = await begin(email);
    const back = await idp.signIn(started.url, email);
    await h.deps.store.db
      .updateTable('sso_flows')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .execute();
    await refused('sso.refused_state', await finish(back, started.cookie), /expired/);
  });

  test('a state from another browser (without the flow cookie)', async () => {
    const email = `elsewhere-${randomUUID().slice(0, 6)}@${domain}`;
    const started = await begin(email);
    const back = await idp.signIn(started.url, email);
    await refused('sso.refused_state', await finish(back, null), /another browser/);
    const other = await begin(email);
    await refused('sso.refused_state', await finish(back, other.cookie), /another browser/);
  });

  test('a wrong nonce in the ID token', async () => {
    idp.tamperNextIdToken((claims) => {
      claims.nonce = 'another-sign-in';
    });
    await refused(
      'sso.refused_nonce',
      await signIn(`nonce-${randomUUID().slice(0, 6)}@${domain}`),
      /nonce differs/,
    );
  });

  test('a wrong issuer in the ID token', async () => {
    idp.tamperNextIdToken((claims) => {
      claims.iss = 'https://evil.example.com';
    });
    await refused(
      'sso.refused_issuer',
      await signIn(`iss-${randomUUID().slice(0, 6)}@${domain}`),
      /issuer differs/,
    );
  });

  test("a wrong issuer in the provider's answer (a mix-up)", async () => {
    const res = await signIn(`mixup-${randomUUID().slice(0, 6)}@${domain}`, undefined, {
      iss: 'https://evil.example.com',
    });
    await refused('sso.refused_issuer', res, /issuer differs/);
  });

  test('a wrong audience in the ID token', async () => {
    idp.tamperNextIdToken((claims) => {
      claims.aud = 'another-application';
    });
    await refused(
      'sso.refused_audience',
      await signIn(`aud-${randomUUID().slice(0, 6)}@${domain}`),
      /audience differs/,
    );
  });

  test('a client secret the provider refuses: its own error is told, nothing else', async () => {
    const put = (clientSecret: string) =>
      settings(t.token, {
        issuer_url: idp.issuer,
        client_id: idp.clientId,
        client_secret: clientSecret,
        allowed_domains: [domain],
        default_role: 'developer',
        enabled: true,
      });
    assert.equal((await put('not-the-secret')).status, 200);
    try {
      const res = await signIn(`secret-${randomUUID().slice(0, 6)}@${domain}`);
      await refused('sso.refused_provider', res, /did not complete the sign-in \(invalid_client/);
    } finally {
      assert.equal((await put(idp.clientSecret)).status, 200);
    }
  });

  test('a provider Berth cannot reach: said, without the network details', async () => {
    const other = await h.tenant();
    const otherDomain = `${randomUUID().slice(0, 8)}.example.org`;
    const set = await settings(other.token, {
      issuer_url: 'http://127.0.0.1:9',
      client_id: 'berth',
      client_secret: 'secret',
      allowed_domains: [otherDomain],
      default_role: 'viewer',
      enabled: true,
    });
    assert.equal(set.status, 200, set.raw);
    const res = await h.request('POST', '/auth/sso/start', { body: { email: `ada@${otherDomain}` } });
    assert.equal(res.status, 500, res.raw);
    assert.match(res.body.message, /The identity provider at http:\/\/127\.0\.0\.1:9 could not be reached/);
    assert.doesNotMatch(res.raw, /ECONNREFUSED|fetch failed/);
  });

  test('the provider refusing the sign-in', async () => {
    const email = `denied-${randomUUID().slice(0, 6)}@${domain}`;
    const started = await begin(email);
    const state = new URL(started.url).searchParams.get('state') as string;
    const res = await finish(
      new URL(`http://${HOST}/?state=${state}&error=access_denied&error_description=The+user+said+no`),
      started.cookie,
    );
    await refused('sso.refused_provider', res, /did not complete the sign-in \(The user said no\)/);
  });
});

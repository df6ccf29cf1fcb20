import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/api/app.ts';
import { openRuntime } from '../../src/runtime.ts';
import { SoftAuthenticator } from '../helpers/authenticator.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { ADMIN_TOKEN, type Harness, type Reply, startHarness, type Tenant } from '../helpers/harness.ts';

/**
 * Passkeys (docs/access.md), with a software authenticator (test/helpers/authenticator.ts): registering
 * in a session, signing in through the same session start as a password, and every refusal: a challenge
 * never issued, used already, expired or another user's; a counter gone back; another site's origin; an
 * unknown passkey; a token instead of a session. test/browser/passkeys.test.ts does it in Chromium.
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000, authFailuresPerMin: 1000 });
  t = await h.tenant();
});
after(() => h.close());

const PASSWORD = 'correct horse battery';
const REFUSED = { error_code: 'unauthorized', message: 'This passkey was not accepted', errors: null };

function cookieOf(res: Reply): string {
  const set = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_session='));
  assert.ok(set, 'a session cookie was set');
  return set.split(';')[0] as string;
}

interface Person {
  userId: string;
  email: string;
  /** The headers of a write in the person's session: its cookie and CSRF token. */
  headers: Record<string, string>;
}

/** A member signed in with a password: a session, as the console has one. */
async function person(role = 'developer'): Promise<Person> {
  const email = `${randomUUID()}@example.com`;
  const user = await h.admin('POST', '/users', { email, display_name: 'Ada' });
  const userId = user.body.data.user.id as string;
  assert.equal((await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role })).status, 200);
  const link = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/sign-in-links`);
  const res = await h.request('POST', '/auth/sign-in-link', {
    body: { token: link.body.data.token, password: PASSWORD },
  });
  assert.equal(res.status, 200, res.raw);
  return { userId, email, headers: { cookie: cookieOf(res), 'x-csrf-token': res.body.data.csrf_token } };
}

async function registrationOptions(p: Person) {
  const res = await h.request('POST', '/v1/passkeys/registration-options', {
    token: null,
    headers: p.headers,
    body: {},
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.options;
}

async function register(p: Person, authenticator = new SoftAuthenticator(), name = 'Laptop') {
  const credential = authenticator.register(await registrationOptions(p));
  const res = await h.request('POST', '/v1/passkeys', {
    token: null,
    headers: p.headers,
    body: { name, credential },
  });
  assert.equal(res.status, 200, res.raw);
  return { authenticator, passkey: res.body.data.passkey as { id: string; name: string } };
}

async function signInOptions() {
  const res = await h.request('POST', '/auth/passkey-options', { body: {} });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.options as { challenge: string; rpId: string };
}

function signIn(credential: unknown) {
  return h.request('POST', '/auth/passkey', { body: { credential } });
}

async function auditActions(userId: string) {
  const rows = await h.deps.store.db
    .selectFrom('audit_logs')
    .select(['action', 'actor'])
    .where('user_id', '=', userId)
    .where((eb) => eb.or([eb('action', 'like', 'passkey.%'), eb('action', 'like', 'session.%')]))
    .orderBy('created_at')
    .execute();
  return rows.map((r) => `${r.actor}: ${r.action}`);
}

describe('registering', () => {
  test('a passkey registered in a session is listed, signs in, and starts a session as a password does', async () => {
    const p = await person('developer');
    const options = await registrationOptions(p);
    assert.equal(options.rp.id, 'localhost', 'the site the request reached');
    assert.equal(options.user.name, p.email);
    assert.equal(Buffer.from(options.user.id, 'base64url').toString(), p.userId, 'the handle is the user id');
    assert.equal(options.authenticatorSelection.residentKey, 'required');
    assert.equal(options.authenticatorSelection.userVerification, 'required');
    const authenticator = new SoftAuthenticator();
    const created = await h.request('POST', '/v1/passkeys', {
      token: null,
      headers: p.headers,
      body: { name: 'Laptop', credential: authenticator.register(options) },
    });
    assert.equal(created.status, 200, created.raw);
    assert.equal(created.body.data.passkey.name, 'Laptop');
    assert.deepEqual(created.body.data.passkey.transports, ['internal']);
    assert.equal(created.body.data.passkey.last_used_at, null);

    const list = await h.request('GET', '/v1/passkeys', { token: null, headers: p.headers });
    assert.deepEqual(
      list.body.data.passkeys.map((k: { id: string }) => k.id),
      [created.body.data.passkey.id],
    );
    // The next registration excludes this authenticator.
    const again = await registrationOptions(p);
    assert.deepEqual(
      again.excludeCredentials.map((c: { id: string }) => c.id),
      [authenticator.id],
    );

    const res = await signIn(authenticator.authenticate(await signInOptions()));
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.user.id, p.userId);
    assert.equal(res.body.data.role, 'developer');
    assert.equal(res.body.data.account_id, t.accountId);
    const cookie = cookieOf(res);
    const envs = await h.request('GET', '/v1/environments', { token: null, headers: { cookie } });
    assert.equal(envs.status, 200, envs.raw);
    const session = await h.request('GET', '/auth/session', { headers: { cookie } });
    assert.equal(session.body.data.session_id, res.body.data.session_id);
    const used = await h.request('GET', '/v1/passkeys', { token: null, headers: p.headers });
    assert.ok(used.body.data.passkeys[0].last_used_at, 'last_used_at noted');
    assert.deepEqual(await auditActions(p.userId), [
      `${p.email}: session.sign_in_link`,
      `${p.email}: passkey.register`,
      `${p.email}: session.sign_in_passkey`,
    ]);
  });

  test('a challenge never issued, or issued to another user, registers nothing; each is used once', async () => {
    const p = await person();
    const other = await person();
    const made = new SoftAuthenticator().register(await registrationOptions(p), {
      challenge: 'bm90LWlzc3VlZA',
    });
    const refused = await h.request('POST', '/v1/passkeys', {
      token: null,
      headers: p.headers,
      body: { credential: made },
    });
    assert.equal(refused.status, 422, refused.raw);
    assert.equal(refused.body.errors[0].field, 'credential');
    // Another user's registration: their challenge, answered in this session.
    const theirs = new SoftAuthenticator().register(await registrationOptions(other));
    const stolen = await h.request('POST', '/v1/passkeys', {
      token: null,
      headers: p.headers,
      body: { credential: theirs },
    });
    assert.equal(stolen.status, 422, stolen.raw);
    // Used once: the second answer to the same options is refused.
    const options = await registrationOptions(p);
    const first = await h.request('POST', '/v1/passkeys', {
      token: null,
      headers: p.headers,
      body: { credential: new SoftAuthenticator().register(options) },
    });
    assert.equal(first.status, 200, first.raw);
    const second = await h.request('POST', '/v1/passkeys', {
      token: null,
      headers: p.headers,
      body: { credential: new SoftAuthenticator().register(options) },
    });
    assert.equal(second.status, 422, second.raw);
    const list = await h.request('GET', '/v1/passkeys', { token: null, headers: p.headers });
    assert.equal(list.body.data.passkeys.length, 1);
  });

  test('another origin, or no user verification, registers nothing', async () => {
    const p = await person();
    for (const overrides of [
      { origin: 'https://evil.example' },
      { userVerified: false },
      { rpId: 'evil.example' },
    ]) {
      const credential = new SoftAuthenticator().register(await registrationOptions(p), overrides);
      const res = await h.request('POST', '/v1/passkeys', {
        token: null,
        headers: p.headers,
        body: { credential },
      });
      assert.equal(res.status, 422, `${JSON.stringify(overrides)}: ${res.raw}`);
      assert.deepEqual(res.body.errors, [
        { field: 'credential', error: 'credential did not verify as a passkey for this site' },
      ]);
    }
  });

  test('a token, even an owner one, neither registers nor removes passkeys; it lists none', async () => {
    const options = await h.request('POST', '/v1/passkeys/registration-options', {
      token: t.token,
      body: {},
    });
    assert.equal(options.status, 403, options.raw);
    assert.match(options.body.message, /signed-in console session/);
    const removed = await h.request('DELETE', `/v1/passkeys/${randomUUID()}`, { token: t.token });
    assert.equal(removed.status, 403, removed.raw);
    const list = await h.request('GET', '/v1/passkeys', { token: t.token });
    assert.deepEqual(list.body.data.passkeys, []);
  });

  test('a session write without the CSRF token is refused', async () => {
    const p = await person();
    const res = await h.request('POST', '/v1/passkeys/registration-options', {
      token: null,
      headers: { cookie: p.headers.cookie as string },
      body: {},
    });
    assert.equal(res.status, 403, res.raw);
  });
});

describe('signing in', () => {
  test('a challenge never issued, replayed or expired is the same 401 as an unknown passkey', async () => {
    const p = await person();
    const { authenticator } = await register(p);
    const unknown = await signIn(new SoftAuthenticator().authenticate(await signInOptions()));
    assert.equal(unknown.status, 401);
    assert.deepEqual(unknown.body, REFUSED);

    const never = await signIn(authenticator.authenticate({ challenge: 'bmV2ZXItaXNzdWVk' }));
    assert.deepEqual([never.status, never.body], [401, REFUSED]);

    const options = await signInOptions();
    const credential = authenticator.authenticate(options);
    assert.equal((await signIn(credential)).status, 200);
    const replayed = await signIn(credential);
    assert.deepEqual([replayed.status, replayed.body], [401, REFUSED], 'the same answer, sent again');
    // A fresh signature on the used challenge is refused too.
    const resigned = await signIn(authenticator.authenticate(options));
    assert.deepEqual([resigned.status, resigned.body], [401, REFUSED]);

    const expiring = await signInOptions();
    await h.deps.store.db
      .updateTable('webauthn_challenges')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('challenge', '=', expiring.challenge)
      .execute();
    const expired = await signIn(authenticator.authenticate(expiring));
    assert.deepEqual([expired.status, expired.body], [401, REFUSED]);
    // A registration's challenge signs nobody in.
    const registration = await registrationOptions(p);
    const crossed = await signIn(authenticator.authenticate({ challenge: registration.challenge }));
    assert.deepEqual([crossed.status, crossed.body], [401, REFUSED]);
  });

  test('a counter gone back (or standing still) is refused and audited; the real authenticator goes on', async () => {
    const p = await person();
    const { authenticator, passkey } = await register(p);
    authenticator.counter = 5;
    assert.equal((await signIn(authenticator.authenticate(await signInOptions()))).status, 200);
    // A clone made earlier, at counter 3.
    authenticator.counter = 3;
    const behind = await signIn(authenticator.assertion(await signInOptions()));
    assert.deepEqual([behind.status, behind.body], [401, REFUSED]);
    authenticator.counter = 6;
    const same = await signIn(authenticator.assertion(await signInOptions()));
    assert.deepEqual([same.status, same.body], [401, REFUSED]);
    const refusals = await h.deps.store.db
      .selectFrom('audit_logs')
      .selectAll()
      .where('action', '=', 'passkey.refused')
      .where('resource_id', '=', passkey.id)
      .execute();
    assert.equal(refusals.length, 2);
    assert.equal(refusals[0]?.account_id, t.accountId);
    assert.equal(refusals[0]?.user_id, p.userId);
    assert.equal((await signIn(authenticator.authenticate(await signInOptions()))).status, 200);
  });

  test("another user's passkey, another site's origin or an unverified user sign nobody in", async () => {
    const p = await person();
    const other = await person();
    const { authenticator } = await register(p);
    await register(other);
    const otherHandle = Buffer.from(other.userId).toString('base64url');
    const cases = [
      { userHandle: otherHandle },
      { origin: 'https://evil.example' },
      { rpId: 'evil.example' },
      { userVerified: false },
    ];
    for (const overrides of cases) {
      const res = await signIn(authenticator.authenticate(await signInOptions(), overrides));
      assert.deepEqual([res.status, res.body], [401, REFUSED], JSON.stringify(overrides));
    }
    assert.equal((await signIn(authenticator.authenticate(await signInOptions()))).status, 200);
  });

  test("a removed passkey signs in no more; another person's cannot be removed", async () => {
    const p = await person();
    const other = await person();
    const { authenticator, passkey } = await register(p);
    const theirs = await h.request('DELETE', `/v1/passkeys/${passkey.id}`, {
      token: null,
      headers: other.headers,
    });
    assert.equal(theirs.status, 404, theirs.raw);
    assert.equal(theirs.body.message, 'Passkey not found');
    const removed = await h.request('DELETE', `/v1/passkeys/${passkey.id}`, {
      token: null,
      headers: p.headers,
    });
    assert.equal(removed.status, 200, removed.raw);
    const res = await signIn(authenticator.authenticate(await signInOptions()));
    assert.deepEqual([res.status, res.body], [401, REFUSED]);
    assert.ok((await auditActions(p.userId)).includes(`${p.email}: passkey.delete`));
  });

  test('a passkey of someone no longer a member starts no session', async () => {
    const p = await person('viewer');
    const { authenticator } = await register(p);
    assert.equal((await h.admin('DELETE', `/accounts/${t.accountId}/members/${p.userId}`)).status, 200);
    const res = await signIn(authenticator.authenticate(await signInOptions()));
    assert.equal(res.status, 403, res.raw);
    assert.equal(res.body.message, 'You are not a member of any account');
  });

  test('refusals count towards the failed-authentication limit of the address', async () => {
    const limited = await startHarness({ authFailuresPerMin: 2, trustProxy: ['127.0.0.1'] });
    try {
      const headers = { 'x-forwarded-for': '10.7.7.7' };
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const options = (await limited.request('POST', '/auth/passkey-options', { body: {} })).body.data
          .options;
        const res = await limited.request('POST', '/auth/passkey', {
          headers,
          body: { credential: new SoftAuthenticator().authenticate(options) },
        });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [401, 401, 429]);
    } finally {
      await limited.close();
    }
  });
});

test('a ceremony begun on one API process ends on another of the same Postgres database', {
  skip: TEST_DATABASE !== 'postgres' && 'several processes can serve one database only on Postgres',
}, async () => {
  const second = await openRuntime(h.deps.config, pino({ level: 'silent' }));
  const app2 = await buildApp(second.deps, { adminToken: ADMIN_TOKEN });
  after(async () => {
    await app2.close();
    await second.close();
  });
  const on2 = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await app2.inject({ method: 'POST', url, payload: body as object, headers });
    return { status: res.statusCode, body: res.json() };
  };
  const p = await person();
  // Registration: options from this process, the credential to the other.
  const authenticator = new SoftAuthenticator();
  const added = await on2(
    '/v1/passkeys',
    { credential: authenticator.register(await registrationOptions(p)) },
    p.headers,
  );
  assert.equal(added.status, 200, JSON.stringify(added.body));
  // Sign-in: options from the other process, the answer to this one.
  const options = await on2('/auth/passkey-options', {});
  assert.equal(options.status, 200);
  const res = await signIn(authenticator.authenticate(options.body.data.options));
  assert.equal(res.status, 200, res.raw);
  assert.equal(res.body.data.user.id, p.userId);
});

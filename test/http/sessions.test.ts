import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { type Harness, type Reply, startHarness, type Tenant } from '../helpers/harness.ts';

/** People signing in: one-time links, passwords, session cookies, CSRF, expiry, sign-out (docs/access.md). */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000, authFailuresPerMin: 5, trustProxy: ['127.0.0.1'] });
  t = await h.tenant();
});
after(() => h.close());

const PASSWORD = 'correct horse battery';

/** Each request from an address of its own, unless it names one: failures counted by address stay apart. */
function call(method: string, url: string, options: Parameters<Harness['request']>[2] = {}) {
  const address = `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
  return h.request(method, url, { ...options, headers: { 'x-forwarded-for': address, ...options.headers } });
}

function cookieOf(res: Reply): string {
  const set = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_session='));
  assert.ok(set, 'a session cookie was set');
  return set.split(';')[0] as string;
}

/** A member of the tenant's account with a password, set through a one-time sign-in link. */
async function member(role: string) {
  const email = `${randomUUID()}@example.com`;
  const user = await h.admin('POST', '/users', { email, display_name: 'Ada' });
  const userId = user.body.data.user.id as string;
  assert.equal((await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role })).status, 200);
  const link = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/sign-in-links`);
  assert.equal(link.status, 200, link.raw);
  assert.match(link.body.data.path, /^\/#\/sign-in-link\?token=/);
  const used = await call('POST', '/auth/sign-in-link', {
    body: { token: link.body.data.token, password: PASSWORD },
  });
  assert.equal(used.status, 200, used.raw);
  return { email, userId, token: link.body.data.token as string };
}

async function signIn(email: string, password = PASSWORD, address = '10.0.0.1') {
  return call('POST', '/auth/sign-in', {
    body: { email, password },
    headers: { 'x-forwarded-for': address },
  });
}

describe('sign-in links', () => {
  test('work once; a refused password leaves the link working', async () => {
    const email = `${randomUUID()}@example.com`;
    const user = await h.admin('POST', '/users', { email, display_name: 'Bo' });
    const userId = user.body.data.user.id as string;
    await h.admin('PUT', `/accounts/${t.accountId}/members/${userId}`, { role: 'viewer' });
    const link = await h.admin('POST', `/accounts/${t.accountId}/members/${userId}/sign-in-links`);
    const token = link.body.data.token;
    const short = await call('POST', '/auth/sign-in-link', { body: { token, password: 'short' } });
    assert.equal(short.status, 422, short.raw);
    assert.deepEqual(short.body.errors, [
      { field: 'password', error: 'password must be at least 12 characters long' },
    ]);
    const ok = await call('POST', '/auth/sign-in-link', { body: { token, password: PASSWORD } });
    assert.equal(ok.status, 200, ok.raw);
    assert.equal(ok.body.data.role, 'viewer');
    const again = await call('POST', '/auth/sign-in-link', { body: { token } });
    assert.equal(again.status, 401, again.raw);
  });

  test('an expired link is refused', async () => {
    const m = await member('viewer');
    const link = await h.admin('POST', `/accounts/${t.accountId}/members/${m.userId}/sign-in-links`);
    await h.deps.store.db
      .updateTable('sign_in_links')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .execute();
    const res = await call('POST', '/auth/sign-in-link', { body: { token: link.body.data.token } });
    assert.equal(res.status, 401, res.raw);
  });
});

describe('password sign-in', () => {
  test('sets an HttpOnly SameSite=Lax cookie that authenticates /v1 as the member', async () => {
    const m = await member('developer');
    const res = await signIn(m.email);
    assert.equal(res.status, 200, res.raw);
    const set = [res.headers['set-cookie']].flat().find((c) => c?.startsWith('berth_session=')) ?? '';
    assert.match(set, /HttpOnly/);
    assert.match(set, /SameSite=Lax/);
    assert.doesNotMatch(set, /Secure/, 'served over plain HTTP');
    assert.equal(res.body.data.role, 'developer');
    const cookie = cookieOf(res);
    const envs = await call('GET', '/v1/environments', { headers: { cookie } });
    assert.equal(envs.status, 200, envs.raw);
    const session = await call('GET', '/auth/session', { headers: { cookie } });
    assert.equal(session.body.data.csrf_token, res.body.data.csrf_token);
    const none = await call('GET', '/auth/session');
    assert.equal(none.status, 200, 'a signed-out browser asking is no error');
    assert.equal(none.body.data, null);
    // Admin routes need admin: the session acts as the membership's role.
    const tokens = await call('GET', '/v1/tokens', { headers: { cookie } });
    assert.equal(tokens.status, 403, tokens.raw);
  });

  test('Secure when the request came over HTTPS through a trusted proxy', async () => {
    const m = await member('viewer');
    const res = await call('POST', '/auth/sign-in', {
      body: { email: m.email, password: PASSWORD },
      headers: { 'x-forwarded-proto': 'https' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.match(String(res.headers['set-cookie']), /; Secure/);
  });

  test('an unknown email and a wrong password get the same answer', async () => {
    const m = await member('viewer');
    const wrong = await signIn(m.email, 'not the password at all', '10.0.1.1');
    const unknown = await signIn(`${randomUUID()}@example.com`, 'not the password at all', '10.0.1.2');
    assert.equal(wrong.status, 401);
    assert.equal(unknown.status, 401);
    assert.equal(wrong.body.message, unknown.body.message);
    assert.equal(wrong.body.message, 'The email or the password is wrong');
  });

  test('guessing is throttled per address and per account', async () => {
    const m = await member('viewer');
    for (let i = 0; i < 5; i++)
      assert.equal((await signIn(m.email, `wrong guess ${i}!`, '10.0.2.1')).status, 401);
    const byAddress = await signIn(`${randomUUID()}@example.com`, PASSWORD, '10.0.2.1');
    assert.equal(byAddress.status, 429, byAddress.raw);
    assert.match(byAddress.body.message, /from this address/);
    // Another address, the same account: its own limit holds, even with the right password.
    const byAccount = await signIn(m.email, PASSWORD, '10.0.2.2');
    assert.equal(byAccount.status, 429, byAccount.raw);
    assert.match(byAccount.body.message, /for this account/);
  });
});

describe('sessions', () => {
  test('cookie-authenticated writes need the CSRF token', async () => {
    const m = await member('admin');
    const res = await signIn(m.email, PASSWORD, '10.0.3.1');
    const cookie = cookieOf(res);
    const body = { name: 'ci', role: 'viewer' };
    const without = await call('POST', '/v1/tokens', { headers: { cookie }, body });
    assert.equal(without.status, 403, without.raw);
    assert.match(without.body.message, /x-csrf-token/);
    const wrong = await call('POST', '/v1/tokens', { headers: { cookie, 'x-csrf-token': 'x' }, body });
    assert.equal(wrong.status, 403, wrong.raw);
    const csrf = res.body.data.csrf_token as string;
    const made = await call('POST', '/v1/tokens', { headers: { cookie, 'x-csrf-token': csrf }, body });
    assert.equal(made.status, 200, made.raw);
    assert.equal(made.body.data.token.owner.email, m.email);
    // A session is no token: listed through one, no token is the call's own.
    const listed = await call('GET', '/v1/tokens', { headers: { cookie } });
    assert.equal(listed.status, 200, listed.raw);
    assert.ok(listed.body.data.tokens.length >= 2);
    assert.ok(listed.body.data.tokens.every((token: { current: boolean }) => token.current === false));
    const audit = await call('GET', '/v1/audit-logs?action=api_token.create', { token: t.token });
    const entry = audit.body.data.audit_logs.find(
      (e: { resource_id: string }) => e.resource_id === made.body.data.token.id,
    );
    assert.equal(entry.actor, m.email);
  });

  test('listed; one ended by id and sign-out end them: their cookies stop working', async () => {
    const m = await member('viewer');
    const one = cookieOf(await signIn(m.email, PASSWORD, '10.0.4.1'));
    const twoRes = await signIn(m.email, PASSWORD, '10.0.4.1');
    const two = cookieOf(twoRes);
    const list = await call('GET', '/v1/sessions', { headers: { cookie: two } });
    assert.equal(list.status, 200, list.raw);
    const sessions = list.body.data.sessions as { id: string; current: boolean }[];
    assert.ok(sessions.length >= 3, 'the link, and both sign-ins');
    assert.equal(sessions.find((s) => s.current)?.id, twoRes.body.data.session_id);
    const oneId = sessions.find((s) => !s.current)?.id;
    // Another person's session is not found.
    const other = await call('DELETE', `/v1/sessions/${oneId}`, { token: t.token });
    assert.equal(other.status, 404, other.raw);
    const csrf = twoRes.body.data.csrf_token;
    const ended = await call('DELETE', `/v1/sessions/${oneId}`, {
      headers: { cookie: two, 'x-csrf-token': csrf },
    });
    assert.equal(ended.status, 200, ended.raw);
    assert.ok(
      !(await call('GET', '/v1/sessions', { headers: { cookie: two } })).body.data.sessions.some(
        (s: { id: string }) => s.id === oneId,
      ),
    );
    void one;
    const out = await call('POST', '/auth/sign-out', { headers: { cookie: two, 'x-csrf-token': csrf } });
    assert.equal(out.status, 200, out.raw);
    assert.match(String(out.headers['set-cookie']), /berth_session=;/);
    assert.equal((await call('GET', '/v1/environments', { headers: { cookie: two } })).status, 401);
  });

  test('idle and absolute expiry', async () => {
    const m = await member('viewer');
    const idle = await signIn(m.email, PASSWORD, '10.0.5.1');
    const old = await signIn(m.email, PASSWORD, '10.0.5.1');
    const db = h.deps.store.db;
    await db
      .updateTable('sessions')
      .set({ last_seen_at: new Date(Date.now() - 13 * 3600_000) })
      .where('id', '=', idle.body.data.session_id)
      .execute();
    await db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', old.body.data.session_id)
      .execute();
    assert.equal(
      (await call('GET', '/v1/environments', { headers: { cookie: cookieOf(idle) } })).status,
      401,
    );
    assert.equal((await call('GET', '/v1/environments', { headers: { cookie: cookieOf(old) } })).status, 401);
  });

  test("a removed member's sessions end", async () => {
    const m = await member('viewer');
    const res = await signIn(m.email, PASSWORD, '10.0.6.1');
    const cookie = cookieOf(res);
    assert.equal((await call('GET', '/v1/environments', { headers: { cookie } })).status, 200);
    assert.equal((await h.admin('DELETE', `/accounts/${t.accountId}/members/${m.userId}`)).status, 200);
    assert.equal((await call('GET', '/v1/environments', { headers: { cookie } })).status, 401);
    const row = await h.deps.store.db
      .selectFrom('sessions')
      .select('ended_at')
      .where('id', '=', res.body.data.session_id)
      .executeTakeFirstOrThrow();
    assert.ok(row.ended_at, 'ended, not merely unusable');
  });
});

describe('invitations', () => {
  async function invite(headers: Record<string, string>, body: Record<string, unknown>) {
    return call('POST', '/v1/invitations', { headers, body });
  }

  test('an admin invites; accepting makes the user and the membership, once', async () => {
    const email = `${randomUUID()}@example.com`;
    const res = await invite({ authorization: `Bearer ${t.token}` }, { email, role: 'developer' });
    assert.equal(res.status, 200, res.raw);
    const made = res.body.data.invitation;
    assert.equal(made.mailed, false, 'no BERTH_SMTP_URL: shown only');
    assert.equal(made.path, `/#/accept-invitation?token=${made.token}`);
    const short = await call('POST', '/auth/accept-invitation', {
      body: { token: made.token, password: 'short' },
    });
    assert.equal(short.status, 422, short.raw);
    const accepted = await call('POST', '/auth/accept-invitation', {
      body: { token: made.token, password: PASSWORD, display_name: 'Cy' },
    });
    assert.equal(accepted.status, 200, accepted.raw);
    assert.equal(accepted.body.data.role, 'developer');
    assert.equal(accepted.body.data.user.email, email);
    const envs = await call('GET', '/v1/environments', { headers: { cookie: cookieOf(accepted) } });
    assert.equal(envs.status, 200, envs.raw);
    const again = await call('POST', '/auth/accept-invitation', {
      body: { token: made.token, password: PASSWORD },
    });
    assert.equal(again.status, 401, again.raw);
    assert.equal((await signIn(email, PASSWORD, '10.0.7.1')).status, 200, 'the password set works');
    const twice = await invite({ authorization: `Bearer ${t.token}` }, { email, role: 'viewer' });
    assert.equal(twice.status, 409, twice.raw);
  });

  test('pending ones are listed (never their links) with who invited, and revoked; the link then fails', async () => {
    const tenant = await h.tenant();
    const owner = { authorization: `Bearer ${tenant.token}` };
    const admin = await member('admin');
    const adminSession = await signIn(admin.email, PASSWORD, '10.0.8.1');
    // The admin is a member of t's account: invite into that one with the session, the rest with tokens.
    const adminHeaders = {
      cookie: cookieOf(adminSession),
      'x-csrf-token': adminSession.body.data.csrf_token,
    };
    const byAdmin = await invite(adminHeaders, { email: `${randomUUID()}@example.com`, role: 'viewer' });
    assert.equal(byAdmin.status, 200, byAdmin.raw);
    const listedByAdmin = await call('GET', '/v1/invitations', { headers: adminHeaders });
    assert.equal(listedByAdmin.status, 200, listedByAdmin.raw);
    const mine = listedByAdmin.body.data.invitations.find(
      (i: { id: string }) => i.id === byAdmin.body.data.invitation.id,
    );
    assert.deepEqual(mine.invited_by, { user_id: admin.userId, email: admin.email });
    assert.deepEqual(Object.keys(mine).sort(), [
      'created_at',
      'email',
      'expires_at',
      'id',
      'invited_by',
      'role',
    ]);

    const first = await invite(owner, { email: `${randomUUID()}@example.com`, role: 'developer' });
    const second = await invite(owner, { email: `${randomUUID()}@example.com`, role: 'owner' });
    const accepted = await invite(owner, { email: `${randomUUID()}@example.com`, role: 'viewer' });
    const accepting = await call('POST', '/auth/accept-invitation', {
      body: { token: accepted.body.data.invitation.token, password: PASSWORD },
    });
    assert.equal(accepting.status, 200, accepting.raw);
    const list = await call('GET', '/v1/invitations', { token: tenant.token });
    assert.equal(list.status, 200, list.raw);
    assert.deepEqual(
      list.body.data.invitations.map((i: { email: string; role: string; invited_by: unknown }) => [
        i.email,
        i.role,
        i.invited_by,
      ]),
      [
        [second.body.data.invitation.email, 'owner', null],
        [first.body.data.invitation.email, 'developer', null],
      ],
      "newest first; the accepted one and the other account's left out",
    );
    for (const made of [first, second])
      assert.ok(!list.raw.includes(made.body.data.invitation.token), 'never the link');
    const [newest] = list.body.data.invitations as { created_at: string; expires_at: string }[];
    assert.ok(newest && Date.parse(newest.expires_at) > Date.parse(newest.created_at));

    // Revoked: gone from the list, its link refused, a second revocation not found.
    const firstId = first.body.data.invitation.id as string;
    const revoked = await call('DELETE', `/v1/invitations/${firstId}`, { token: tenant.token });
    assert.equal(revoked.status, 200, revoked.raw);
    assert.deepEqual(revoked.body.data, { revoked: true });
    const after = await call('GET', '/v1/invitations', { token: tenant.token });
    assert.deepEqual(
      after.body.data.invitations.map((i: { id: string }) => i.id),
      [second.body.data.invitation.id],
    );
    const refused = await call('POST', '/auth/accept-invitation', {
      body: { token: first.body.data.invitation.token, password: PASSWORD },
    });
    assert.equal(refused.status, 401, refused.raw);
    assert.match(refused.body.message, /revoked/);
    assert.equal((await call('DELETE', `/v1/invitations/${firstId}`, { token: tenant.token })).status, 404);
    // Another account's invitation is not found; an accepted one neither.
    const otherAccount = await call('DELETE', `/v1/invitations/${byAdmin.body.data.invitation.id}`, {
      token: tenant.token,
    });
    assert.equal(otherAccount.status, 404, otherAccount.raw);
    const gone = await call('DELETE', `/v1/invitations/${accepted.body.data.invitation.id}`, {
      token: tenant.token,
    });
    assert.equal(gone.status, 404, gone.raw);
  });

  test("an admin cannot revoke an owner's invitation; a developer neither lists nor revokes", async () => {
    const toOwner = await invite(
      { authorization: `Bearer ${t.token}` },
      { email: `${randomUUID()}@example.com`, role: 'owner' },
    );
    const id = toOwner.body.data.invitation.id as string;
    const admin = await member('admin');
    const session = await signIn(admin.email, PASSWORD, '10.0.8.2');
    const headers = { cookie: cookieOf(session), 'x-csrf-token': session.body.data.csrf_token };
    const above = await call('DELETE', `/v1/invitations/${id}`, { headers });
    assert.equal(above.status, 403, above.raw);
    assert.match(above.body.message, /needs the owner role/);
    const developer = await member('developer');
    const dev = await signIn(developer.email, PASSWORD, '10.0.8.3');
    const devHeaders = { cookie: cookieOf(dev), 'x-csrf-token': dev.body.data.csrf_token };
    const list = await call('GET', '/v1/invitations', { headers: devHeaders });
    assert.equal(list.status, 403, list.raw);
    assert.match(list.body.message, /needs the admin role/);
    assert.equal((await call('DELETE', `/v1/invitations/${id}`, { headers: devHeaders })).status, 403);
    const still = await call('GET', '/v1/invitations', { token: t.token });
    assert.ok(
      still.body.data.invitations.some((i: { id: string }) => i.id === id),
      'still pending',
    );
  });

  test('an expired invitation is refused; a role above the inviter is a field error; developers cannot invite', async () => {
    const res = await invite(
      { authorization: `Bearer ${t.token}` },
      { email: `${randomUUID()}@example.com`, role: 'viewer' },
    );
    await h.deps.store.db
      .updateTable('invitations')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', res.body.data.invitation.id)
      .execute();
    const late = await call('POST', '/auth/accept-invitation', {
      body: { token: res.body.data.invitation.token, password: PASSWORD },
    });
    assert.equal(late.status, 401, late.raw);
    const admin = await member('admin');
    const signed = await signIn(admin.email, PASSWORD, '10.0.8.1');
    const headers = { cookie: cookieOf(signed), 'x-csrf-token': signed.body.data.csrf_token };
    const higher = await invite(headers, { email: `${randomUUID()}@example.com`, role: 'owner' });
    assert.equal(higher.status, 422, higher.raw);
    assert.deepEqual(higher.body.errors, [
      { field: 'role', error: 'role cannot be higher than your own role (admin)' },
    ]);
    const dev = await member('developer');
    const devSigned = await signIn(dev.email, PASSWORD, '10.0.8.2');
    const refused = await invite(
      { cookie: cookieOf(devSigned), 'x-csrf-token': devSigned.body.data.csrf_token },
      { email: `${randomUUID()}@example.com`, role: 'viewer' },
    );
    assert.equal(refused.status, 403, refused.raw);
  });

  test("an existing user's invitation needs their own password: the link alone never takes them over", async () => {
    const m = await member('viewer');
    const other = await h.tenant();
    const res = await invite({ authorization: `Bearer ${other.token}` }, { email: m.email, role: 'viewer' });
    const token = res.body.data.invitation.token;
    const wrong = await call('POST', '/auth/accept-invitation', {
      body: { token, password: 'someone elses pass' },
    });
    assert.equal(wrong.status, 401, wrong.raw);
    const ok = await call('POST', '/auth/accept-invitation', { body: { token, password: PASSWORD } });
    assert.equal(ok.status, 200, ok.raw);
    assert.equal(ok.body.data.account_id, other.accountId);
  });

  test('an invitation accepted by someone who became a member meanwhile leaves their membership as it is', async () => {
    const owner = await member('owner');
    const stale = await invite(
      { authorization: `Bearer ${t.token}` },
      { email: owner.email, role: 'viewer' },
    );
    assert.equal(stale.status, 409, 'a member is never invited');
    const email = `${randomUUID()}@example.com`;
    const asViewer = await invite({ authorization: `Bearer ${t.token}` }, { email, role: 'viewer' });
    const asOwner = await invite({ authorization: `Bearer ${t.token}` }, { email, role: 'owner' });
    const first = await call('POST', '/auth/accept-invitation', {
      body: { token: asOwner.body.data.invitation.token, password: PASSWORD },
    });
    assert.equal(first.body.data.role, 'owner', first.raw);
    const second = await call('POST', '/auth/accept-invitation', {
      body: { token: asViewer.body.data.invitation.token, password: PASSWORD },
    });
    assert.equal(second.status, 200, second.raw);
    assert.equal(second.body.data.role, 'owner', 'the stale viewer invitation demotes nobody');
    const members = await call('GET', '/v1/members', { headers: { authorization: `Bearer ${t.token}` } });
    const joined = members.body.data.members.find((m: { email: string }) => m.email === email);
    assert.equal(joined.role, 'owner');
  });

  test('mailed through BERTH_SMTP_URL', async () => {
    const received: string[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, _session, done) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          received.push(Buffer.concat(chunks).toString());
          done();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    const port = (smtp.server.address() as AddressInfo).port;
    const mailing = await startHarness({ smtpUrl: `smtp://127.0.0.1:${port}` });
    try {
      const tenant = await mailing.tenant();
      const email = `${randomUUID()}@example.com`;
      const res = await mailing.request('POST', '/v1/invitations', {
        token: tenant.token,
        body: { email, role: 'viewer' },
      });
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.data.invitation.mailed, true);
      assert.equal(received.length, 1);
      assert.match(received[0] as string, new RegExp(`To: ${email}`));
      const unfolded = (received[0] as string).replace(/=\r?\n/g, '').replace(/=3D/g, '=');
      assert.ok(unfolded.includes(`/#/accept-invitation?token=${res.body.data.invitation.token}`), unfolded);
    } finally {
      await mailing.close();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    }
  });
});

describe('members', () => {
  test('admins list and remove members; never one above them, never the last owner', async () => {
    const admin = await member('admin');
    const signed = await signIn(admin.email, PASSWORD, '10.0.9.1');
    const headers = { cookie: cookieOf(signed), 'x-csrf-token': signed.body.data.csrf_token };
    const list = await call('GET', '/v1/members', { headers });
    assert.equal(list.status, 200, list.raw);
    assert.ok(
      list.body.data.members.some(
        (m: { email: string; role: string }) => m.email === admin.email && m.role === 'admin',
      ),
    );
    const viewer = await member('viewer');
    const viewerSession = cookieOf(await signIn(viewer.email, PASSWORD, '10.0.9.2'));
    const removed = await call('DELETE', `/v1/members/${viewer.userId}`, { headers });
    assert.equal(removed.status, 200, removed.raw);
    assert.equal((await call('GET', '/v1/environments', { headers: { cookie: viewerSession } })).status, 401);
    assert.equal((await call('DELETE', `/v1/members/${viewer.userId}`, { headers })).status, 404);
    const owner = await member('owner');
    const above = await call('DELETE', `/v1/members/${owner.userId}`, { headers });
    assert.equal(above.status, 403, above.raw);
    // The operator token acts as owner; with other owners gone, the last one stays.
    const other = await h.tenant();
    const onlyOwner = await h.admin('POST', '/users', {
      email: `${randomUUID()}@example.com`,
      display_name: 'O',
    });
    const ownerId = onlyOwner.body.data.user.id as string;
    await h.admin('PUT', `/accounts/${other.accountId}/members/${ownerId}`, { role: 'owner' });
    const owners = await call('GET', '/v1/members', { token: other.token });
    for (const m of owners.body.data.members as { user_id: string; role: string }[]) {
      if (m.role === 'owner' && m.user_id !== ownerId)
        await call('DELETE', `/v1/members/${m.user_id}`, { token: other.token });
    }
    const last = await call('DELETE', `/v1/members/${ownerId}`, { token: other.token });
    assert.equal(last.status, 409, last.raw);
  });
});

describe('the last owner', () => {
  /** A fresh account whose only owners are `count` new users. */
  async function ownedBy(count: number) {
    const tenant = await h.tenant();
    const owners: string[] = [];
    for (let i = 0; i < count; i++) {
      const user = await h.admin('POST', '/users', {
        email: `${randomUUID()}@example.com`,
        display_name: 'O',
      });
      const userId = user.body.data.user.id as string;
      const made = await h.admin('PUT', `/accounts/${tenant.accountId}/members/${userId}`, { role: 'owner' });
      assert.equal(made.status, 200, made.raw);
      owners.push(userId);
    }
    return { tenant, owners: owners as [string, string] };
  }

  const REFUSED = /^The account keeps at least one owner: make another owner first/;

  test('the operator neither removes nor demotes it, and is told how to make another owner', async () => {
    const { tenant, owners } = await ownedBy(1);
    const [owner] = owners;
    const removed = await h.admin('DELETE', `/accounts/${tenant.accountId}/members/${owner}`);
    assert.equal(removed.status, 409, removed.raw);
    assert.equal(removed.body.error_code, 'conflict');
    assert.match(removed.body.message, REFUSED);
    assert.ok(
      removed.body.message.includes(`PUT /admin/v1/accounts/${tenant.accountId}/members/{userId}`),
      removed.body.message,
    );
    const demoted = await h.admin('PUT', `/accounts/${tenant.accountId}/members/${owner}`, { role: 'admin' });
    assert.equal(demoted.status, 409, demoted.raw);
    assert.match(demoted.body.message, REFUSED);
    // Still the owner; given a second one, the first may go.
    const members = await h.admin('GET', `/accounts/${tenant.accountId}/members`);
    assert.deepEqual(
      members.body.data.members.map((m: { user_id: string; role: string }) => [m.user_id, m.role]),
      [[owner, 'owner']],
    );
    const second = await h.admin('POST', '/users', {
      email: `${randomUUID()}@example.com`,
      display_name: 'S',
    });
    const secondId = second.body.data.user.id as string;
    await h.admin('PUT', `/accounts/${tenant.accountId}/members/${secondId}`, { role: 'owner' });
    const demotedNow = await h.admin('PUT', `/accounts/${tenant.accountId}/members/${owner}`, {
      role: 'admin',
    });
    assert.equal(demotedNow.status, 200, demotedNow.raw);
    assert.equal(demotedNow.body.data.member.role, 'admin');
  });

  const outcomes = (replies: Reply[]) => replies.map((r) => r.status).sort();

  test('two owners removed at once by the operator: one goes, the other stays', async () => {
    const { tenant, owners } = await ownedBy(2);
    const replies = await Promise.all(
      owners.map((id) => h.admin('DELETE', `/accounts/${tenant.accountId}/members/${id}`)),
    );
    assert.deepEqual(outcomes(replies), [200, 409], replies.map((r) => r.raw).join('\n'));
    const members = await h.admin('GET', `/accounts/${tenant.accountId}/members`);
    assert.equal(members.body.data.members.filter((m: { role: string }) => m.role === 'owner').length, 1);
  });

  test('two owners demoted at once by the operator: one is, the other stays owner', async () => {
    const { tenant, owners } = await ownedBy(2);
    const replies = await Promise.all(
      owners.map((id) => h.admin('PUT', `/accounts/${tenant.accountId}/members/${id}`, { role: 'viewer' })),
    );
    assert.deepEqual(outcomes(replies), [200, 409], replies.map((r) => r.raw).join('\n'));
    const members = await h.admin('GET', `/accounts/${tenant.accountId}/members`);
    assert.equal(members.body.data.members.filter((m: { role: string }) => m.role === 'owner').length, 1);
  });

  test('two owners removed at once through the account API, or one removed and one demoted: one passes', async () => {
    const removals = await ownedBy(2);
    const replies = await Promise.all(
      removals.owners.map((id) => call('DELETE', `/v1/members/${id}`, { token: removals.tenant.token })),
    );
    assert.deepEqual(outcomes(replies), [200, 409], replies.map((r) => r.raw).join('\n'));
    assert.match(replies.find((r) => r.status === 409)?.body.message, REFUSED);

    const mixed = await ownedBy(2);
    const [first, second] = mixed.owners;
    const both = await Promise.all([
      call('DELETE', `/v1/members/${first}`, { token: mixed.tenant.token }),
      h.admin('PUT', `/accounts/${mixed.tenant.accountId}/members/${second}`, { role: 'developer' }),
    ]);
    assert.deepEqual(outcomes(both), [200, 409], both.map((r) => r.raw).join('\n'));
  });
});

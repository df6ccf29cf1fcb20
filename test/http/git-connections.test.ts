import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Git connections through the admin API: what each kind takes, secrets sealed at rest and never read
 * back, and a connection in use cannot be deleted.
 */
let h: Harness;
let t: Tenant;
const TOKEN = 'ghp_connection-token-never-shown';
const WEBHOOK_SECRET = 'webhook-secret-never-shown';
const PRIVATE_KEY = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
  type: 'pkcs1',
  format: 'pem',
}) as string;

before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

const connections = () => `/accounts/${t.accountId}/git-connections`;

test('a token, a GitHub App and a GitLab token connect; the answers and the table never hold a secret', async () => {
  const token = await h.admin('POST', connections(), {
    kind: 'github',
    name: 'acme',
    token: TOKEN,
    webhook_secret: WEBHOOK_SECRET,
  });
  assert.equal(token.status, 200, token.raw);
  assert.deepEqual(
    { ...token.body.data.git_connection, id: '', created_at: '', updated_at: '' },
    {
      id: '',
      account_id: t.accountId,
      kind: 'github',
      name: 'acme',
      base_url: 'https://github.com',
      credential: 'token',
      github_app_id: null,
      github_installation_id: null,
      // The URL to give the host: its deliveries are checked against this connection alone.
      webhook_path: `/hooks/github/${token.body.data.git_connection.id}`,
      created_at: '',
      updated_at: '',
    },
  );
  const app = await h.admin('POST', connections(), {
    kind: 'github',
    name: 'acme app',
    base_url: 'https://github.acme.example/',
    github_app_id: '123456',
    github_installation_id: '7890',
    private_key: PRIVATE_KEY,
    webhook_secret: WEBHOOK_SECRET,
  });
  assert.equal(app.status, 200, app.raw);
  assert.equal(app.body.data.git_connection.credential, 'github_app');
  assert.equal(app.body.data.git_connection.base_url, 'https://github.acme.example');
  const lab = await h.admin('POST', connections(), {
    kind: 'gitlab',
    name: 'lab',
    base_url: 'https://gitlab.acme.example',
    token: TOKEN,
    webhook_secret: WEBHOOK_SECRET,
  });
  assert.equal(lab.status, 200, lab.raw);

  const listed = await h.admin('GET', connections());
  assert.equal(listed.body.data.git_connections.length, 3);
  const rows = await h.deps.store.db.selectFrom('git_connections').selectAll().execute();
  const everything = JSON.stringify([token.raw, app.raw, lab.raw, listed.raw, rows]);
  for (const secret of [TOKEN, WEBHOOK_SECRET, 'PRIVATE KEY'])
    assert.equal(everything.includes(secret), false, `${secret} shows`);
  // Sealed, not dropped: the box opens what was stored.
  const stored = rows.find((r) => r.id === lab.body.data.git_connection.id);
  assert.equal(h.deps.secretBox.open(stored?.secret_sealed ?? ''), TOKEN);
  assert.equal(h.deps.secretBox.open(stored?.webhook_secret_sealed ?? ''), WEBHOOK_SECRET);
});

test('each kind asks for its own credential; a bad key or base URL is a field error', async () => {
  const cases: [Record<string, unknown>, string[]][] = [
    [{ kind: 'gitlab', github_app_id: '1' }, ['github_app_id', 'token']],
    [{ kind: 'github' }, ['github_app_id', 'github_installation_id', 'private_key']],
    [{ kind: 'github', token: TOKEN, github_app_id: '1' }, ['token']],
    [
      { kind: 'github', github_app_id: '1', github_installation_id: '2', private_key: 'not a key' },
      ['private_key'],
    ],
    [{ kind: 'github', token: TOKEN, base_url: 'https://user:pw@github.com' }, ['base_url']],
    [{ kind: 'github', token: TOKEN, base_url: 'ftp://github.com' }, ['base_url']],
    [{ kind: 'github', token: TOKEN, webhook_secret: 'short' }, ['webhook_secret']],
  ];
  for (const [body, fields] of cases) {
    const res = await h.admin('POST', connections(), { name: 'x', webhook_secret: WEBHOOK_SECRET, ...body });
    assert.equal(res.status, 422, res.raw);
    assert.deepEqual(
      res.body.errors.map((e: { field: string }) => e.field).sort(),
      fields.sort(),
      JSON.stringify(body),
    );
  }
  const unknown = await h.admin('POST', `/accounts/${randomUUID()}/git-connections`, {
    kind: 'github',
    name: 'x',
    token: TOKEN,
    webhook_secret: WEBHOOK_SECRET,
  });
  assert.equal(unknown.status, 404);
  const bearer = await h.request('GET', `/admin/v1${connections()}`, { token: t.token });
  assert.equal(bearer.status, 401, 'an API token is not the admin token');
});

test('a connection a service clones with cannot be deleted; once unused it can', async () => {
  const created = await h.admin('POST', connections(), {
    kind: 'github',
    name: 'in use',
    token: TOKEN,
    webhook_secret: WEBHOOK_SECRET,
  });
  const id = created.body.data.git_connection.id;
  const service = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.github, installation_id: id },
  });
  assert.equal(service.status, 200, service.raw);
  // A read names the connection the service uses (an id, not a secret), as a GitLab service's does.
  assert.equal(service.body.data.service.installation_id, id);
  const read = await h.request(
    'GET',
    `/v1/environments/${t.envId}/services/${service.body.data.service.id}`,
    {
      token: t.token,
    },
  );
  assert.equal(read.body.data.service.installation_id, id);
  const listed = await h.request('GET', `/v1/environments/${t.envId}/services`, { token: t.token });
  assert.equal(
    listed.body.data.services.find((s: { id: string }) => s.id === service.body.data.service.id)
      ?.installation_id,
    id,
  );
  const refused = await h.admin('DELETE', `/git-connections/${id}`);
  assert.equal(refused.status, 409, refused.raw);
  assert.match(refused.body.message, /used by 1 service/);

  const url = `/v1/environments/${t.envId}/services/${service.body.data.service.id}`;
  const unset = await h.request('PATCH', url, { token: t.token, body: { installation_id: null } });
  assert.equal(unset.status, 200, unset.raw);
  assert.equal('installation_id' in unset.body.data.service, false, 'unset: omitted, as unset fields are');
  assert.equal((await h.admin('DELETE', `/git-connections/${id}`)).status, 200);
  const gone = await h.admin('DELETE', `/git-connections/${id}`);
  assert.equal(gone.status, 404);
  assert.equal(gone.body.message, 'Connection not found');
  const audit = await h.deps.store.db
    .selectFrom('audit_logs')
    .select(['action', 'actor'])
    .where('resource_id', '=', id)
    .orderBy('created_at')
    .execute();
  assert.deepEqual(audit, [
    { action: 'git_connection.create', actor: 'Operator' },
    { action: 'git_connection.delete', actor: 'Operator' },
  ]);
});

test("rotating a connection's secrets keeps its id; each credential takes its own secret", async () => {
  const created = await h.admin('POST', connections(), {
    kind: 'gitlab',
    name: 'rotated',
    token: TOKEN,
    webhook_secret: WEBHOOK_SECRET,
  });
  const id = created.body.data.git_connection.id;
  const rotated = await h.admin('PATCH', `/git-connections/${id}`, {
    token: 'glpat-the-new-token',
    webhook_secret: 'the-new-webhook-secret',
  });
  assert.equal(rotated.status, 200, rotated.raw);
  assert.equal(rotated.body.data.git_connection.id, id);
  assert.equal(rotated.raw.includes('the-new'), false);
  const row = await h.deps.store.db
    .selectFrom('git_connections')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  assert.equal(h.deps.secretBox.open(row.secret_sealed), 'glpat-the-new-token');
  assert.equal(h.deps.secretBox.open(row.webhook_secret_sealed), 'the-new-webhook-secret');
  const wrong = await h.admin('PATCH', `/git-connections/${id}`, { private_key: PRIVATE_KEY });
  assert.equal(wrong.status, 422);
  assert.deepEqual(wrong.body.errors, [
    { field: 'private_key', error: 'this connection authenticates with a token: give token' },
  ]);
  assert.equal((await h.admin('PATCH', `/git-connections/${randomUUID()}`, { name: 'x' })).status, 404);
});

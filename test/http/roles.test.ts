import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { RouteOptions } from 'fastify';
import { checkDeclaredRole } from '../../src/api/plugins/roles.ts';
import { hashApiToken, newApiToken } from '../../src/domain/api-token.ts';
import { ROLES, type Role, roleAtLeast } from '../../src/domain/roles.ts';
import { insertApiToken } from '../../src/store/repositories/accounts.ts';
import { setEnvironmentState } from '../../src/store/repositories/environments.ts';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { type Route, registeredRoutes } from '../helpers/routes.ts';

/**
 * Done-means 1 of issue 28: every /v1 route, called by a token of each role, a read-only token and
 * tokens narrowed to one environment, answers as docs/access.md's table says. The table is read from
 * the docs, and every registered route must be in it with the role its definition declares.
 */

interface Documented {
  role: Role;
  wholeAccount: boolean;
}

/** docs/access.md's route table: `| \`METHOD /v1/...\` | role | yes/no |`. */
function documentedRoutes(): Map<string, Documented> {
  const text = fs.readFileSync(new URL('../../docs/access.md', import.meta.url), 'utf8');
  const table = new Map<string, Documented>();
  for (const match of text.matchAll(/^\| `([A-Z]+ \/v1\/\S*)` \| (\w+) \| (yes|no) \|$/gm)) {
    const [, route, role, whole] = match as unknown as [string, string, Role, string];
    assert.ok(ROLES.includes(role), `docs/access.md: ${route} names no role: ${role}`);
    assert.ok(!table.has(route), `docs/access.md lists ${route} twice`);
    table.set(route, { role, wholeAccount: whole === 'yes' });
  }
  return table;
}

interface Caller {
  name: string;
  token: string;
  role: Role;
  readOnly?: boolean;
  /** Narrowed to the environment the fixtures are in (`here`) or to another one (`elsewhere`). */
  scope?: 'here' | 'elsewhere';
}

type Outcome = 'allowed' | 'role' | 'read-only' | 'whole-account' | 'hidden';

/** What the docs' table says a caller gets on a route. */
function expected(route: Route, doc: Documented, caller: Caller): Outcome {
  if (!roleAtLeast(caller.role, doc.role)) return 'role';
  if (caller.readOnly && route.method !== 'GET') return 'read-only';
  if (caller.scope !== undefined && doc.wholeAccount) return 'whole-account';
  if (caller.scope === 'elsewhere' && /:(envId|deploymentId)\b/.test(route.url)) return 'hidden';
  return 'allowed';
}

function outcomeOf(res: Reply, doc: Documented): Outcome {
  assert.notEqual(res.status, 401, res.raw);
  if (res.status === 403) {
    const message = String(res.body.message);
    assert.equal(res.body.error_code, 'forbidden');
    if (message.startsWith('This call needs the ')) {
      assert.ok(message.startsWith(`This call needs the ${doc.role} role;`), message);
      return 'role';
    }
    if (message.startsWith('This token is read-only')) return 'read-only';
    if (message.startsWith('This call acts on the whole account')) return 'whole-account';
  }
  if (res.status === 404 && ['Environment not found', 'Deployment not found'].includes(res.body.message)) {
    return 'hidden';
  }
  return 'allowed';
}

let h: Harness;
let t: Tenant;
let otherEnvId: string;
const ids: Record<string, string> = {};
const callers: Caller[] = [];
const documented = documentedRoutes();

/** A token made through POST /v1/tokens with the operator's token. */
async function tokenFor(role: Role, extra: { environments?: string[]; readOnly?: boolean } = {}) {
  const res = await h.request('POST', '/v1/tokens', {
    token: t.token,
    body: {
      name: `${role} token`,
      role,
      environment_ids: extra.environments,
      read_only: extra.readOnly,
    },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.token.token as string;
}

before(async () => {
  h = await startHarness({ rateLimitPerMin: 100_000 });
  t = await h.tenant();
  const env = await h.admin('POST', `/accounts/${t.accountId}/environments`, { name: 'other' });
  otherEnvId = env.body.data.environment.id;
  await setEnvironmentState(h.deps.store.db, otherEnvId, 'available');
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200, created.raw);
  ids.envId = t.envId;
  ids.serviceId = created.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${ids.serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  assert.equal(deployed.status, 200, deployed.raw);
  ids.deploymentId = deployed.body.data.deployment_id;
  const domain = await h.request(
    'POST',
    `/v1/environments/${t.envId}/services/${ids.serviceId}/custom-domains`,
    { token: t.token, body: { domain: 'roles.example.com' } },
  );
  assert.equal(domain.status, 200, domain.raw);
  ids.customDomainId = domain.body.data.custom_domain.id;
  const webhook = await h.request('POST', '/v1/webhooks', {
    token: t.token,
    body: { url: 'https://93.184.215.14/hooks' },
  });
  assert.equal(webhook.status, 200, webhook.raw);
  ids.webhookId = webhook.body.data.webhook.id;
  ids.deliveryId = randomUUID();
  callers.push({ name: 'operator token', token: t.token, role: 'owner' });
  for (const role of ROLES) callers.push({ name: role, token: await tokenFor(role), role });
  callers.push({
    name: 'read-only owner',
    token: await tokenFor('owner', { readOnly: true }),
    role: 'owner',
    readOnly: true,
  });
  callers.push({
    name: 'owner of this environment',
    token: await tokenFor('owner', { environments: [t.envId] }),
    role: 'owner',
    scope: 'here',
  });
  callers.push({
    name: 'owner of another environment',
    token: await tokenFor('owner', { environments: [otherEnvId] }),
    role: 'owner',
    scope: 'elsewhere',
  });
});
after(() => h.close());

const apiRoutes = () =>
  registeredRoutes(h).filter((r) => r.url.startsWith('/v1/') && r.url !== '/v1/openapi.json');
const keyOf = (r: { method: string; url: string }) => `${r.method} ${r.url}`;

describe('the table in docs/access.md', () => {
  test('lists every registered /v1 route, with the role and scope its definition declares', () => {
    const registered = apiRoutes();
    assert.ok(registered.length >= 30, `found ${registered.length} routes`);
    assert.deepEqual(registered.map(keyOf).sort(), [...documented.keys()].sort());
    for (const route of registered) {
      const doc = documented.get(keyOf(route));
      assert.deepEqual(
        { role: route.role, wholeAccount: route.wholeAccount },
        { role: doc?.role, wholeAccount: doc?.wholeAccount },
        keyOf(route),
      );
    }
  });

  test('the OpenAPI document names the role of every operation (x-berth-role)', async () => {
    const res = await h.request('GET', '/v1/openapi.json');
    const paths = res.body.paths as Record<string, Record<string, { 'x-berth-role'?: string }>>;
    for (const [route, doc] of documented) {
      const [method, url] = route.split(' ') as [string, string];
      const path = url.replace(/:(\w+)/g, '{$1}');
      assert.equal(paths[path]?.[method.toLowerCase()]?.['x-berth-role'], doc.role, route);
    }
  });

  test('a /v1 route that declares no role is refused at registration', () => {
    const route = { method: 'GET', url: '/v1/undeclared', handler: () => {} } as RouteOptions;
    assert.throws(() => checkDeclaredRole(route), /GET \/v1\/undeclared declares no role/);
    assert.throws(() => checkDeclaredRole({ ...route, config: { role: 'superuser' as Role } }));
    checkDeclaredRole({ ...route, config: { role: 'viewer' } });
  });
});

describe('every route, for every caller, answers as the table says', () => {
  test('the matrix', async () => {
    const mismatches: string[] = [];
    for (const route of apiRoutes()) {
      const doc = documented.get(keyOf(route));
      if (!doc) continue;
      // A DELETE reads no body: it names a never-existing last resource (allowed: its 404), so it deletes nothing.
      const url = route.url.replace(/:(\w+)(\/?)/g, (_, name: string, slash: string) => {
        const last = slash === '' && route.method === 'DELETE' && name !== 'envId';
        return (last ? randomUUID() : (ids[name] ?? randomUUID())) + slash;
      });
      for (const caller of callers) {
        // A write gets a body that cannot be read: allowed, it stops at 422 and changes nothing.
        const res =
          route.method === 'GET'
            ? await h.request('GET', url, { token: caller.token })
            : await h.request(route.method, url, {
                token: caller.token,
                rawBody: '{"name": ',
                headers: { 'content-type': 'application/json' },
              });
        const want = expected(route, doc, caller);
        const got = outcomeOf(res, doc);
        if (want !== got)
          mismatches.push(`${keyOf(route)} as ${caller.name}: ${got}, not ${want} (${res.raw})`);
      }
    }
    assert.deepEqual(mismatches, []);
  });
});

describe('what the table cannot say', () => {
  test('a viewer reads secret keys but never a value', async () => {
    const put = await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'PLAIN', value: 'visible-to-developers' }] },
    });
    assert.equal(put.status, 200, put.raw);
    const viewer = callers.find((c) => c.name === 'viewer') as Caller;
    const developer = callers.find((c) => c.name === 'developer') as Caller;
    const asViewer = await h.request('GET', `/v1/environments/${t.envId}/secrets`, { token: viewer.token });
    assert.equal(asViewer.status, 200, asViewer.raw);
    assert.deepEqual(
      asViewer.body.data.secrets.map((s: { key: string; value?: string }) => [s.key, s.value]),
      [['PLAIN', undefined]],
    );
    const asDeveloper = await h.request('GET', `/v1/environments/${t.envId}/secrets`, {
      token: developer.token,
    });
    assert.equal(asDeveloper.body.data.secrets[0].value, 'visible-to-developers');
  });

  test('a 403 names the role the call needs, in the error envelope', async () => {
    const viewer = callers.find((c) => c.name === 'viewer') as Caller;
    const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: viewer.token,
      body: VALID_SERVICE.docker,
    });
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, {
      error_code: 'forbidden',
      message: 'This call needs the developer role; this token acts as viewer',
      errors: null,
    });
  });

  test('a token narrowed to an environment lists only that one, and finds nothing elsewhere', async () => {
    const elsewhere = callers.find((c) => c.scope === 'elsewhere') as Caller;
    const list = await h.request('GET', '/v1/environments', { token: elsewhere.token });
    assert.deepEqual(
      list.body.data.environments.map((e: { id: string }) => e.id),
      [otherEnvId],
    );
    // Exactly what a never-existing environment answers.
    const hidden = await h.request('GET', `/v1/environments/${t.envId}`, { token: elsewhere.token });
    const never = await h.request('GET', `/v1/environments/${randomUUID()}`, { token: elsewhere.token });
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.body, never.body);
    const own = await h.request('GET', `/v1/environments/${otherEnvId}`, { token: elsewhere.token });
    assert.equal(own.status, 200, own.raw);
  });

  test('a token narrowed to an environment reads only the audit entries about it', async () => {
    const elsewhere = callers.find((c) => c.scope === 'elsewhere') as Caller;
    const here = callers.find((c) => c.scope === 'here') as Caller;
    const put = await h.request('PUT', `/v1/environments/${otherEnvId}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'ELSEWHERE', value: 'x' }] },
    });
    assert.equal(put.status, 200, put.raw);
    const environmentsOf = async (token: string) => {
      const res = await h.request('GET', '/v1/audit-logs?limit=100', { token });
      assert.equal(res.status, 200, res.raw);
      return new Set(
        res.body.data.audit_logs.map((e: { environment_id: string | null }) => e.environment_id),
      );
    };
    assert.deepEqual(await environmentsOf(elsewhere.token), new Set([otherEnvId]));
    assert.deepEqual(await environmentsOf(here.token), new Set([t.envId]));
    const all = await environmentsOf(t.token);
    assert.ok(all.has(null) && all.has(t.envId) && all.has(otherEnvId), 'the whole account sees every entry');
  });

  test('a cached read (a polled deployment) is hidden from a token of another environment too', async () => {
    const elsewhere = callers.find((c) => c.scope === 'elsewhere') as Caller;
    // The owner's read fills the cache first.
    const url = `/v1/deployments/${ids.deploymentId}`;
    assert.equal((await h.request('GET', url, { token: t.token })).status, 200);
    const res = await h.request('GET', url, { token: elsewhere.token });
    assert.equal(res.status, 404, res.raw);
    assert.equal(res.body.message, 'Deployment not found');
  });

  test('an expired token is unauthorized', async () => {
    const token = newApiToken();
    await insertApiToken(h.deps.store.db, {
      id: randomUUID(),
      account_id: t.accountId,
      token_hash: hashApiToken(token),
      name: 'expired',
      role: 'owner',
      expires_at: new Date(Date.now() - 1000),
    });
    const res = await h.request('GET', '/v1/environments', { token });
    assert.equal(res.status, 401, res.raw);
  });
});

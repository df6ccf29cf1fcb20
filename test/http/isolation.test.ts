import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { registeredRoutes as listRoutes } from '../helpers/routes.ts';
import { openSse } from '../helpers/sse.ts';

/**
 * Spec: "Resources are scoped to the caller's account. A resource of another account behaves as if it
 * did not exist (404)." Account A's token, aimed at account B's environment, service and deployment on
 * every route that takes an id, must get exactly the answer a never-existing id gets, and change nothing.
 */
let h: Harness;
let a: Tenant;
let b: Tenant;
let bServiceId: string;
let bDeploymentId: string;
let bCustomDomainId: string;
let aServiceId: string;
// biome-ignore lint/suspicious/noExplicitAny: snapshots of JSON bodies
let bBefore: Record<string, any>;

type Ids = {
  envId: string;
  serviceId: string;
  deploymentId: string;
  customDomainId: string;
  dependencyId: string;
  backupId: string;
};

interface RouteCase {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  /** A valid body: had the scope check failed, this would have changed B's resource. */
  body?: unknown;
}

/** Every route with an id in its path. Checked below against the routes the app registers. */
const ROUTES: RouteCase[] = [
  { method: 'GET', url: '/v1/environments/:envId' },
  { method: 'GET', url: '/v1/environments/:envId/secrets' },
  {
    method: 'PUT',
    url: '/v1/environments/:envId/secrets',
    body: { secrets: [{ key: 'HIJACK', value: 'x' }] },
  },
  { method: 'POST', url: '/v1/environments/:envId/services', body: VALID_SERVICE.docker },
  { method: 'GET', url: '/v1/environments/:envId/services' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId' },
  {
    method: 'PATCH',
    url: '/v1/environments/:envId/services/:serviceId',
    body: { name: 'Hijacked', replica_count: 0, is_protected: false },
  },
  { method: 'DELETE', url: '/v1/environments/:envId/services/:serviceId' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/secrets' },
  {
    method: 'PUT',
    url: '/v1/environments/:envId/services/:serviceId/secrets',
    body: { secrets: [{ key: 'HIJACK', value: 'x' }] },
  },
  { method: 'POST', url: '/v1/environments/:envId/services/:serviceId/deploy', body: {} },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/deployments' },
  { method: 'GET', url: '/v1/deployments/:deploymentId' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/logs' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/metrics' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/alert-rules' },
  {
    method: 'PUT',
    url: '/v1/environments/:envId/services/:serviceId/alert-rules',
    body: { memory_high: { enabled: false } },
  },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/alerts' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/dependencies' },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/dependencies/:dependencyId/backups' },
  {
    method: 'POST',
    url: '/v1/environments/:envId/services/:serviceId/dependencies/:dependencyId/backups',
    body: {},
  },
  {
    method: 'POST',
    url: '/v1/environments/:envId/services/:serviceId/dependencies/:dependencyId/backups/:backupId/restore',
    body: { force: true },
  },
  { method: 'GET', url: '/v1/deployments/:deploymentId/logs' },
  { method: 'GET', url: '/v1/deployments/:deploymentId/operations' },
  { method: 'POST', url: '/v1/deployments/:deploymentId/cancel', body: {} },
  { method: 'POST', url: '/v1/environments/:envId/services/:serviceId/rollback', body: {} },
  { method: 'POST', url: '/v1/environments/:envId/services/:serviceId/restart', body: {} },
  {
    method: 'POST',
    url: '/v1/environments/:envId/services/:serviceId/custom-domains',
    body: { domain: 'hijack.example.com' },
  },
  { method: 'GET', url: '/v1/environments/:envId/services/:serviceId/custom-domains' },
  {
    method: 'POST',
    url: '/v1/environments/:envId/services/:serviceId/custom-domains/:customDomainId/verify',
    body: {},
  },
  // Coming soon (404 today), but they name ids too, so they must not tell them apart either.
  { method: 'DELETE', url: '/v1/environments/:envId' },
  { method: 'DELETE', url: '/v1/environments/:envId/services/:serviceId/custom-domains/:customDomainId' },
];

const key = (r: { method: string; url: string }) => `${r.method} ${r.url}`;
const fill = (url: string, ids: Ids) => url.replace(/:(\w+)/g, (_, name: string) => ids[name as keyof Ids]);
const never = (): Ids => ({
  envId: randomUUID(),
  serviceId: randomUUID(),
  deploymentId: randomUUID(),
  customDomainId: randomUUID(),
  dependencyId: 'db',
  backupId: randomUUID(),
});

const registeredRoutes = () => listRoutes(h);

async function call(route: RouteCase, ids: Ids, options: { malformed?: boolean } = {}): Promise<Reply> {
  const url = fill(route.url, ids);
  if (options.malformed)
    return h.request(route.method, url, {
      token: a.token,
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
  return h.request(route.method, url, { token: a.token, body: route.body });
}

/** What B sees of its own resources, to compare before and after A's attempts. */
async function bView() {
  const get = async (url: string) => {
    const res = await h.request('GET', url, { token: b.token });
    assert.equal(res.status, 200, `B reads ${url}: ${res.raw}`);
    return res.body.data;
  };
  const env = `/v1/environments/${b.envId}`;
  const service = `${env}/services/${bServiceId}`;
  return {
    environment: await get(env),
    environmentSecrets: await get(`${env}/secrets`),
    services: await get(`${env}/services`),
    service: await get(service),
    serviceSecrets: await get(`${service}/secrets`),
    deployments: await get(`${service}/deployments`),
    deployment: await get(`/v1/deployments/${bDeploymentId}`),
    customDomains: await get(`${service}/custom-domains`),
    alertRules: await get(`${service}/alert-rules`),
    alerts: await get(`${service}/alerts`),
    audit: await get('/v1/audit-logs'),
  };
}

before(async () => {
  h = await startHarness({ rateLimitPerMin: 10_000 });
  a = await h.tenant();
  b = await h.tenant();
  const created = await h.request('POST', `/v1/environments/${b.envId}/services`, {
    token: b.token,
    body: { ...VALID_SERVICE.docker, name: 'Bees Service' },
  });
  assert.equal(created.status, 200, created.raw);
  bServiceId = created.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${b.envId}/services/${bServiceId}/deploy`, {
    token: b.token,
    body: {},
  });
  assert.equal(deployed.status, 200, deployed.raw);
  bDeploymentId = deployed.body.data.deployment_id;
  const domain = await h.request(
    'POST',
    `/v1/environments/${b.envId}/services/${bServiceId}/custom-domains`,
    {
      token: b.token,
      body: { domain: 'bees.example.com' },
    },
  );
  assert.equal(domain.status, 200, domain.raw);
  bCustomDomainId = domain.body.data.custom_domain.id;
  for (const url of [
    `/v1/environments/${b.envId}/secrets`,
    `/v1/environments/${b.envId}/services/${bServiceId}/secrets`,
  ]) {
    const put = await h.request('PUT', url, {
      token: b.token,
      body: { secrets: [{ key: 'B_ONLY', value: 'b-secret' }] },
    });
    assert.equal(put.status, 200, put.raw);
  }
  const own = await h.request('POST', `/v1/environments/${a.envId}/services`, {
    token: a.token,
    body: { ...VALID_SERVICE.docker, name: 'Ayes Service' },
  });
  assert.equal(own.status, 200, own.raw);
  aServiceId = own.body.data.service.id;
  bBefore = await bView();
});
after(() => h.close());

describe('the route table', () => {
  test('covers every registered route with an :envId, :serviceId or :deploymentId parameter, and no other', () => {
    const registered = registeredRoutes()
      .filter((r) => /:(envId|serviceId|deploymentId)\b/.test(r.url))
      .map(key)
      .sort();
    assert.ok(registered.length >= 15, `found ${registered.length} routes`);
    assert.deepEqual(ROUTES.map(key).sort(), registered);
  });
});

describe("A's token on B's resources answers exactly as for ids that never existed", () => {
  for (const route of ROUTES) {
    test(key(route), async () => {
      const theirs: Ids = {
        envId: b.envId,
        serviceId: bServiceId,
        deploymentId: bDeploymentId,
        customDomainId: bCustomDomainId,
        dependencyId: 'db',
        backupId: randomUUID(),
      };
      const res = await call(route, theirs);
      const baseline = await call(route, never());
      assert.equal(res.status, 404, res.raw);
      assert.equal(res.body.error_code, 'notfound');
      assert.equal(baseline.status, 404, baseline.raw);
      assert.deepEqual(res.body, baseline.body, 'indistinguishable from a never-existing id');

      if (route.body !== undefined) {
        // A bad body must not turn the 404 into a 422 that would confirm the id exists.
        const malformed = await call(route, theirs, { malformed: true });
        const malformedBaseline = await call(route, never(), { malformed: true });
        assert.equal(malformed.status, 404, malformed.raw);
        assert.deepEqual(malformed.body, malformedBaseline.body);
        assert.deepEqual(malformed.body, res.body);
      }
    });
  }
});

describe("mixed ids: A's own ids combined with B's", () => {
  const withService = ROUTES.filter((r) => r.url.includes(':serviceId'));
  assert.ok(withService.length >= 8);

  for (const route of withService) {
    test(`A's environment with B's service: ${key(route)}`, async () => {
      const mixed: Ids = { ...never(), envId: a.envId, serviceId: bServiceId };
      const baseline: Ids = { ...never(), envId: a.envId };
      const res = await call(route, mixed);
      const expected = await call(route, baseline);
      assert.equal(res.status, 404, res.raw);
      // Coming-soon routes answer before any lookup, so they name the route rather than the service.
      const message =
        route.method === 'DELETE' && route.url.includes('custom-domains')
          ? 'Route not found'
          : 'Service not found';
      assert.deepEqual(res.body, { error_code: 'notfound', message, errors: null });
      assert.deepEqual(res.body, expected.body);
    });

    test(`B's environment with A's own service: ${key(route)}`, async () => {
      const mixed: Ids = { ...never(), envId: b.envId, serviceId: aServiceId };
      const baseline: Ids = { ...never(), serviceId: aServiceId };
      const res = await call(route, mixed);
      const expected = await call(route, baseline);
      assert.equal(res.status, 404, res.raw);
      assert.equal(res.body.error_code, 'notfound');
      assert.deepEqual(res.body, expected.body);
    });
  }

  test("A's own resources still answer A (the 404s above are not a broken route)", async () => {
    const service = await h.request('GET', `/v1/environments/${a.envId}/services/${aServiceId}`, {
      token: a.token,
    });
    assert.equal(service.status, 200);
    assert.equal(service.body.data.service.id, aServiceId);
    const env = await h.request('GET', `/v1/environments/${a.envId}`, { token: a.token });
    assert.equal(env.status, 200);
  });
});

describe("B's resources are untouched and nothing of B shows in A's lists", () => {
  test("B sees exactly what it saw before A's attempts (service, secrets, deployments, audit)", async () => {
    const now = await bView();
    assert.deepEqual(now, bBefore);
    assert.equal(now.service.service.name, 'Bees Service');
    assert.equal(now.service.service.is_deleted, false);
    assert.equal(now.services.services.length, 1, "A created nothing in B's environment");
    assert.equal(now.deployments.deployments.length, 1, "A triggered no deployment of B's service");
    assert.deepEqual(
      now.serviceSecrets.secrets.map((s: { key: string }) => s.key),
      ['B_ONLY'],
    );
    assert.deepEqual(
      now.environmentSecrets.secrets.map((s: { key: string }) => s.key),
      ['B_ONLY'],
    );
    for (const entry of now.audit.audit_logs) assert.notEqual(entry.token_id, a.tokenId);
  });

  test("A's environment list holds A's environment and not B's", async () => {
    const res = await h.request('GET', '/v1/environments', { token: a.token });
    assert.equal(res.status, 200);
    const ids = res.body.data.environments.map((e: { id: string }) => e.id);
    assert.ok(ids.includes(a.envId));
    assert.equal(ids.includes(b.envId), false);
    for (const env of res.body.data.environments) assert.equal(env.account_id, a.accountId);
  });

  test("A's audit log holds A's entries and none of B's", async () => {
    const res = await h.request('GET', '/v1/audit-logs?limit=100', { token: a.token });
    assert.equal(res.status, 200);
    const entries = res.body.data.audit_logs as Record<string, string | null>[];
    assert.ok(
      entries.some((e) => e.action === 'service.create' && e.resource_id === aServiceId),
      "A's own service creation is there",
    );
    const bIds = new Set([b.accountId, b.envId, b.tokenId, bServiceId, bDeploymentId, bCustomDomainId]);
    for (const entry of entries) {
      assert.equal(entry.account_id, a.accountId);
      for (const field of ['resource_id', 'environment_id', 'token_id'])
        assert.equal(bIds.has(entry[field] as string), false, `A's audit log names B's ${field}`);
    }
    assert.equal(res.raw.includes(b.envId), false);
    assert.equal(res.raw.includes(bServiceId), false);

    // B's own log does have B's entries, so the filter above had something to leave out.
    const theirs = await h.request('GET', '/v1/audit-logs?limit=100', { token: b.token });
    assert.ok(theirs.body.data.audit_logs.some((e: { resource_id: string }) => e.resource_id === bServiceId));
  });

  test("A's event stream carries A's changes and none of B's", async () => {
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}/v1/events`;
    const ours = await openSse(`${base}?last_event_id=0`, a.token);
    const theirs = await openSse(`${base}?last_event_id=0`, b.token);
    // A marker change of A's, read after everything before it: the stream has shown all it would.
    const marker = await h.request('PUT', `/v1/environments/${a.envId}/secrets`, {
      token: a.token,
      body: { secrets: [{ key: 'A_MARKER', value: 'a' }] },
    });
    assert.equal(marker.status, 200, marker.raw);
    await ours.until("A's marker", (events) => events.some((e) => e.data.data?.key === 'A_MARKER'));
    await theirs.until("B's service", (events) => events.some((e) => e.data.data?.id === bServiceId));
    ours.close();
    theirs.close();
    assert.ok(ours.events.some((e) => e.event === 'service.created' && e.data.data.id === aServiceId));
    const bIds = [b.accountId, b.envId, bServiceId, bDeploymentId, bCustomDomainId];
    for (const event of ours.events) {
      assert.equal(event.data.account_id, a.accountId);
      for (const id of bIds)
        assert.equal(JSON.stringify(event).includes(id), false, `A's stream names ${id}`);
    }
    assert.ok(theirs.events.every((e) => e.data.account_id === b.accountId));
  });
});

describe("git connections: a service may name only its own account's connection", () => {
  const connection = async (tenant: Tenant, kind: 'github' | 'gitlab') => {
    const res = await h.admin('POST', `/accounts/${tenant.accountId}/git-connections`, {
      kind,
      name: `${kind} of ${tenant.accountId.slice(0, 8)}`,
      token: 'isolation-token',
      webhook_secret: 'isolation-webhook-secret',
    });
    assert.equal(res.status, 200, res.raw);
    return res.body.data.git_connection.id as string;
  };
  const notFound = (res: Reply) => {
    assert.equal(res.status, 404, res.raw);
    assert.deepEqual(res.body, { error_code: 'notfound', message: 'Connection not found', errors: null });
  };

  test("create and PATCH with B's connection, or with none that exists: 404 Connection not found, nothing written", async () => {
    const bGithub = await connection(b, 'github');
    const aGithub = await connection(a, 'github');
    const aGitlab = await connection(a, 'gitlab');
    const services = `/v1/environments/${a.envId}/services`;
    const before = await h.request('GET', services, { token: a.token });
    for (const installation_id of [bGithub, randomUUID(), aGitlab]) {
      notFound(
        await h.request('POST', services, {
          token: a.token,
          body: { ...VALID_SERVICE.github, installation_id },
        }),
      );
    }
    assert.deepEqual((await h.request('GET', services, { token: a.token })).body, before.body);

    const created = await h.request('POST', services, {
      token: a.token,
      body: { ...VALID_SERVICE.github, installation_id: aGithub },
    });
    assert.equal(created.status, 200, created.raw);
    const url = `${services}/${created.body.data.service.id}`;
    for (const installation_id of [bGithub, randomUUID()])
      notFound(await h.request('PATCH', url, { token: a.token, body: { installation_id } }));
    // A gitlab service names a gitlab connection, shown as gitlab_connection_id.
    notFound(
      await h.request('PATCH', url, {
        token: a.token,
        body: { ...VALID_SERVICE.gitlab, installation_id: aGithub },
      }),
    );
    const moved = await h.request('PATCH', url, {
      token: a.token,
      body: { ...VALID_SERVICE.gitlab, installation_id: aGitlab },
    });
    assert.equal(moved.status, 200, moved.raw);
    assert.equal(moved.body.data.service.gitlab_connection_id, aGitlab);

    // B's connection is still B's alone, and A's list of connections does not show it.
    const listed = await h.admin('GET', `/accounts/${a.accountId}/git-connections`);
    assert.deepEqual(
      listed.body.data.git_connections.map((c: { id: string }) => c.id).sort(),
      [aGithub, aGitlab].sort(),
    );
  });
});

describe("webhooks: A's token on B's webhook answers exactly as for one that never existed", () => {
  let bWebhookId: string;
  let bDeliveryId: string;
  let aWebhookId: string;
  before(async () => {
    // A literal public address: no DNS needed, and no worker runs here to send anything.
    const url = 'https://93.184.215.14/hooks';
    const theirs = await h.request('POST', '/v1/webhooks', { token: b.token, body: { url } });
    assert.equal(theirs.status, 200, theirs.raw);
    bWebhookId = theirs.body.data.webhook.id;
    const ours = await h.request('POST', '/v1/webhooks', { token: a.token, body: { url } });
    aWebhookId = ours.body.data.webhook.id;
    await h.request('PUT', `/v1/environments/${b.envId}/secrets`, {
      token: b.token,
      body: { secrets: [{ key: 'B_HOOKED', value: 'b-hooked-value' }] },
    });
    const deliveries = await h.request('GET', `/v1/webhooks/${bWebhookId}/deliveries`, { token: b.token });
    bDeliveryId = deliveries.body.data.deliveries[0].id;
  });

  const WEBHOOK_ROUTES: RouteCase[] = [
    { method: 'GET', url: '/v1/webhooks/:webhookId' },
    { method: 'DELETE', url: '/v1/webhooks/:webhookId' },
    { method: 'GET', url: '/v1/webhooks/:webhookId/deliveries' },
    { method: 'POST', url: '/v1/webhooks/:webhookId/deliveries/:deliveryId/redeliver', body: {} },
  ];

  test('the table covers every webhook route with an id', () => {
    const registered = registeredRoutes()
      .filter((r) => /:webhookId\b/.test(r.url))
      .map(key)
      .sort();
    assert.deepEqual(WEBHOOK_ROUTES.map(key).sort(), registered);
  });

  for (const route of WEBHOOK_ROUTES) {
    test(key(route), async () => {
      const at = (webhookId: string, deliveryId: string) =>
        h.request(
          route.method,
          route.url.replace(':webhookId', webhookId).replace(':deliveryId', deliveryId),
          { token: a.token, body: route.body },
        );
      const res = await at(bWebhookId, bDeliveryId);
      const baseline = await at(randomUUID(), randomUUID());
      assert.equal(res.status, 404, res.raw);
      assert.deepEqual(res.body, baseline.body);
    });
  }

  test("A's own webhook with B's delivery: not found", async () => {
    const res = await h.request('POST', `/v1/webhooks/${aWebhookId}/deliveries/${bDeliveryId}/redeliver`, {
      token: a.token,
      body: {},
    });
    assert.equal(res.status, 404, res.raw);
    assert.equal(res.body.message, 'Webhook delivery not found');
  });

  test("A's list and deliveries hold nothing of B's; B's webhook is untouched", async () => {
    const list = await h.request('GET', '/v1/webhooks', { token: a.token });
    assert.deepEqual(
      list.body.data.webhooks.map((w: { id: string }) => w.id),
      [aWebhookId],
    );
    const ours = await h.request('GET', `/v1/webhooks/${aWebhookId}/deliveries`, { token: a.token });
    assert.equal(ours.raw.includes('B_HOOKED'), false);
    for (const d of ours.body.data.deliveries) assert.notEqual(d.id, bDeliveryId);
    const theirs = await h.request('GET', `/v1/webhooks/${bWebhookId}`, { token: b.token });
    assert.equal(theirs.status, 200);
    const deliveries = await h.request('GET', `/v1/webhooks/${bWebhookId}/deliveries`, { token: b.token });
    assert.equal(deliveries.body.data.deliveries[0].id, bDeliveryId);
    assert.equal(deliveries.body.data.deliveries[0].state, 'pending', 'A did not redeliver it');
  });
});

describe("tokens: A's token on B's tokens answers exactly as for one that never existed", () => {
  test('the table covers every token route with an id', () => {
    const registered = registeredRoutes()
      .filter((r) => r.url.startsWith('/v1/') && /:tokenId\b/.test(r.url))
      .map(key);
    assert.deepEqual(registered, ['DELETE /v1/tokens/:tokenId']);
  });

  test("DELETE /v1/tokens/:tokenId: B's token is not found, and keeps working", async () => {
    const res = await h.request('DELETE', `/v1/tokens/${b.tokenId}`, { token: a.token });
    const baseline = await h.request('DELETE', `/v1/tokens/${randomUUID()}`, { token: a.token });
    assert.equal(res.status, 404, res.raw);
    assert.deepEqual(res.body, baseline.body);
    assert.equal((await h.request('GET', '/v1/environments', { token: b.token })).status, 200);
  });

  test("A's list holds none of B's tokens", async () => {
    const list = await h.request('GET', '/v1/tokens', { token: a.token });
    assert.equal(list.status, 200, list.raw);
    assert.ok(list.body.data.tokens.every((t: { id: string }) => t.id !== b.tokenId));
    assert.ok(list.body.data.tokens.some((t: { id: string }) => t.id === a.tokenId));
  });
});

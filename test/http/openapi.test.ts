import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { sql } from 'kysely';
import { hashApiToken } from '../../src/domain/api-token.ts';
import { DEPLOYMENT_STATES, DEPLOYMENT_TYPES } from '../../src/domain/deployment-states.ts';
import { CLOUDS, ENVIRONMENT_STATES } from '../../src/domain/environment-states.ts';
import { ERROR_CODES } from '../../src/domain/errors.ts';
import { SERVICE_TYPES, SOURCES } from '../../src/domain/service-fields.ts';
import { SERVICE_STATES } from '../../src/domain/service-states.ts';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { isOAuthRoute } from '../helpers/oauth-errors.ts';
import { registeredRoutes as listRoutes } from '../helpers/routes.ts';

let h: Harness;
let t: Tenant;
// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is read as plain JSON
let doc: any;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 5000 });
  t = await h.tenant();
  const res = await h.request('GET', '/v1/openapi.json');
  assert.equal(res.status, 200, 'the description is served without a token');
  doc = res.body;
});
after(() => h.close());

const registeredRoutes = () => listRoutes(h);

const toOpenApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');
const fromOpenApiPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];

function operations(): { method: string; path: string; op: Record<string, unknown> }[] {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>))
    for (const [method, op] of Object.entries(item))
      if (HTTP_METHODS.includes(method)) out.push({ method, path, op: op as Record<string, unknown> });
  return out;
}

/** Spec "coming soon": published, 404 today. */
const COMING_SOON = [
  'post /v1/environments',
  'delete /v1/environments/{envId}',
  'delete /v1/environments/{envId}/services/{serviceId}/custom-domains/{customDomainId}',
];

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema nodes
type Schema = any;

function resolve(schema: Schema): Schema {
  if (schema && typeof schema.$ref === 'string') {
    const name = schema.$ref.replace('#/components/schemas/', '');
    const target = doc.components?.schemas?.[name];
    assert.ok(target, `unresolved $ref ${schema.$ref}`);
    return resolve(target);
  }
  return schema;
}

/** Paths in `value` that `schema` does not name: what a response would leak past its declared shape. */
function undeclared(value: unknown, schema: Schema, at: string): string[] {
  const s = resolve(schema);
  if (!s || value === null || typeof value !== 'object') return [];
  const branches = s.anyOf ?? s.oneOf;
  if (branches) {
    const results = (branches as Schema[]).map((b) => undeclared(value, b, at));
    return results.reduce((best, r) => (r.length < best.length ? r : best));
  }
  if (Array.isArray(value)) return value.flatMap((v, i) => undeclared(v, s.items ?? {}, `${at}[${i}]`));
  const leaks: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const path = `${at}.${key}`;
    const declared = s.properties?.[key];
    const pattern = Object.entries((s.patternProperties ?? {}) as Record<string, Schema>).find(([p]) =>
      new RegExp(p).test(key),
    );
    if (declared) leaks.push(...undeclared(v, declared, path));
    else if (pattern) leaks.push(...undeclared(v, pattern[1], path));
    else if (s.additionalProperties && typeof s.additionalProperties === 'object')
      leaks.push(...undeclared(v, s.additionalProperties, path));
    else leaks.push(path);
  }
  return leaks;
}

function responseSchema(method: string, url: string, status: number): Schema {
  const op = doc.paths[toOpenApiPath(url)]?.[method.toLowerCase()];
  assert.ok(op, `no operation ${method} ${url} in the description`);
  const response = op.responses?.[String(status)];
  assert.ok(response, `${method} ${url} does not document status ${status}`);
  const schema = response.content?.['application/json']?.schema;
  assert.ok(schema, `${method} ${url} ${status} has no JSON schema`);
  return schema;
}

/** The reply is exactly what its documented schema names: no field outside the declared shape. */
function assertSerializedBySchema(method: string, url: string, res: Reply): void {
  const leaks = undeclared(res.body, responseSchema(method, url, res.status), 'body');
  assert.deepEqual(leaks, [], `${method} ${url} answered fields its schema does not name`);
}

describe('the description', () => {
  test('is served without a token, as JSON, and validates as OpenAPI 3.1', async () => {
    const res = await h.request('GET', '/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    const validator = new Validator();
    const result = await validator.validate(res.body);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    assert.equal(validator.version, '3.1');
    assert.match(res.body.openapi, /^3\.1\.\d+$/);
    assert.equal(res.body.info.version, '1.0.0');
  });

  test('a token is not needed, and a bad one does not matter', async () => {
    const res = await h.request('GET', '/v1/openapi.json', { token: randomUUID() });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, doc);
  });

  test('lists every route the server answers, with its method', () => {
    const missing = registeredRoutes()
      .filter((r) => r.url !== '/v1/openapi.json')
      .filter((r) => !doc.paths[toOpenApiPath(r.url)]?.[r.method.toLowerCase()])
      .map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(missing, [], 'registered routes missing from the description');
  });

  test('lists no operation the server does not have', () => {
    const extra = operations()
      .filter(
        ({ method, path }) =>
          !h.app.hasRoute({ method: method.toUpperCase(), url: fromOpenApiPath(path) } as never),
      )
      .map(({ method, path }) => `${method} ${path}`);
    assert.deepEqual(extra, []);
  });

  test('every path parameter is declared on its operation', () => {
    for (const { method, path, op } of operations()) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = ((op.parameters ?? []) as { in: string; name: string }[])
        .filter((p) => p.in === 'path')
        .map((p) => p.name);
      assert.deepEqual(declared.sort(), names.sort(), `${method} ${path}`);
    }
  });

  test('every live operation that answers 200 or 202 documents the schema of that answer (JSON, or each event of a stream)', () => {
    let checked = 0;
    for (const { method, path, op } of operations()) {
      if (COMING_SOON.includes(`${method} ${path}`)) continue;
      const responses = op.responses as Record<string, { content?: Record<string, { schema?: unknown }> }>;
      const success = ['200', '202'].filter((s) => responses[s]);
      assert.ok(success.length > 0, `${method} ${path} documents no success response`);
      for (const status of success) {
        // A stream-only answer (GET /v1/events) documents what each event carries.
        const content = responses[status]?.content;
        // A file (GET /admin/v1/backup) documents its media type.
        const schema =
          content?.['application/json']?.schema ??
          content?.['text/event-stream']?.schema ??
          content?.['application/gzip']?.schema;
        assert.ok(schema, `${method} ${path} ${status} has no response schema`);
        checked++;
      }
    }
    assert.ok(checked >= 20, `checked ${checked} operations`);
  });

  test('every documented error response of /v1 and /admin/v1 has the error body shape', () => {
    for (const { method, path, op } of operations()) {
      if (path === '/health' || path === '/ready') continue;
      for (const [status, response] of Object.entries(
        op.responses as Record<string, { content?: Record<string, { schema?: unknown }> }>,
      )) {
        if (Number(status) < 400) continue;
        const schema = resolve(response.content?.['application/json']?.schema);
        assert.ok(schema, `${method} ${path} ${status} has no schema`);
        assert.deepEqual(
          [...schema.required].sort(),
          // RFC 8628's endpoints answer as RFC 6749 §5.2 says.
          isOAuthRoute(path) ? ['error', 'error_description'] : ['error_code', 'errors', 'message'],
          `${method} ${path}`,
        );
      }
    }
  });

  // Spec: coming-soon endpoints "return 404 today". The description should say so, not promise a 200
  // with no schema that the server never gives.
  test('every request body object, nested ones too, is closed: additionalProperties false', () => {
    const open: string[] = [];
    const visit = (schema: Schema, at: string): void => {
      const s = resolve(schema);
      if (!s || typeof s !== 'object') return;
      if (s.type === 'object' && s.properties && s.additionalProperties !== false) open.push(at);
      for (const [name, property] of Object.entries(s.properties ?? {})) visit(property, `${at}.${name}`);
      if (s.items) visit(s.items, `${at}[]`);
    };
    let bodies = 0;
    for (const { method, path, op } of operations()) {
      const body = (op.requestBody as Schema)?.content?.['application/json']?.schema;
      if (!body) continue;
      bodies++;
      visit(body, `${method} ${path}`);
    }
    assert.ok(bodies >= 8, `request bodies found: ${bodies}`);
    assert.deepEqual(open, []);
  });

  test('coming-soon operations document the 404 they answer, not a 200 without a schema', () => {
    for (const key of COMING_SOON) {
      const [method, path] = key.split(' ') as [string, string];
      const op = doc.paths[path]?.[method];
      assert.ok(op, `${key} is published`);
      const statuses = Object.keys(op.responses);
      assert.ok(statuses.includes('404'), `${key} documents 404 (documents ${statuses.join(', ')})`);
      assert.deepEqual(
        statuses.filter((s) => s.startsWith('2')),
        [],
        `${key} documents a success it never gives`,
      );
    }
  });
});

/** The properties of `key` in the 200 answer of GET `path`. */
function readProperties(path: string, key: string): Record<string, Schema> {
  const schema = resolve(doc.paths[path].get.responses['200'].content['application/json'].schema);
  return resolve(resolve(schema.properties.data).properties[key]).properties;
}

describe("the domain's enums are listed (issue 8: the document differs from before only by them)", () => {
  test('states, types, sources, clouds and error codes are enums of the domain constants', () => {
    const service = readProperties('/v1/environments/{envId}/services/{serviceId}', 'service');
    const deployment = readProperties('/v1/deployments/{deploymentId}', 'deployment');
    const environment = readProperties('/v1/environments/{envId}', 'environment');
    const enumOf = (schema: Schema) => resolve(schema).enum;
    assert.deepEqual(enumOf(service.state), [...SERVICE_STATES]);
    assert.deepEqual(enumOf(service.type), [...SERVICE_TYPES, null]);
    assert.deepEqual(enumOf(service.source), [...SOURCES]);
    assert.deepEqual(enumOf(deployment.state), [...DEPLOYMENT_STATES]);
    assert.deepEqual(enumOf(deployment.type), [...DEPLOYMENT_TYPES]);
    // The hosted API's Deployment `type` enum (shared/reference/hosted-openapi.json): clients built on
    // it refuse any other value.
    for (const type of DEPLOYMENT_TYPES)
      assert.ok(['update', 'restore', 'service_update'].includes(type), type);
    assert.deepEqual(enumOf(environment.state), [...ENVIRONMENT_STATES]);
    assert.deepEqual(enumOf(environment.cloud), [...CLOUDS]);
    assert.deepEqual(enumOf(doc.components.schemas.ErrorBody.properties.error_code), [...ERROR_CODES]);
  });
});

describe('responses are serialized through their declared schemas', () => {
  let serviceId: string;
  let deploymentId: string;
  let installationId: string;

  before(async () => {
    installationId = await h.gitConnection(t, 'github');
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: { ...VALID_SERVICE.github, installation_id: installationId },
    });
    assert.equal(created.status, 200, created.raw);
    serviceId = created.body.data.service.id;
    const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
      token: t.token,
      body: { commit_id: 'abc123', note: 'first' },
    });
    assert.equal(deployed.status, 200, deployed.raw);
    deploymentId = deployed.body.data.deployment_id;
  });

  test('the leak check itself sees a field its schema does not name', () => {
    const deployment = responseSchema('GET', '/v1/deployments/:deploymentId', 200);
    const clean = { message: 'success', data: { deployment: { id: randomUUID(), ops: {}, op_ids: [] } } };
    assert.deepEqual(undeclared(clean, deployment, 'body'), []);
    const leaky = {
      message: 'success',
      data: { deployment: { id: randomUUID(), environment_id: 'x', ops: { a: 1 } } },
    };
    assert.deepEqual(undeclared(leaky, deployment, 'body'), [
      'body.data.deployment.environment_id',
      'body.data.deployment.ops.a',
    ]);
  });

  const INTERNAL_SERVICE_COLUMNS = ['environment_id', 'latest_deployment_id'];
  const INTERNAL_DEPLOYMENT_COLUMNS = ['environment_id'];

  function assertServiceClean(service: Record<string, unknown>, where: string): void {
    for (const column of INTERNAL_SERVICE_COLUMNS)
      assert.equal(column in service, false, `${where}: service carries internal column ${column}`);
    if (service.latest_deployment) assertDeploymentClean(service.latest_deployment as never, where);
  }
  function assertDeploymentClean(deployment: Record<string, unknown>, where: string): void {
    for (const column of INTERNAL_DEPLOYMENT_COLUMNS)
      assert.equal(column in deployment, false, `${where}: deployment carries internal column ${column}`);
  }

  test('service responses (create, list, get, patch) leak no internal column', async () => {
    const base = `/v1/environments/${t.envId}/services`;
    const docker = await h.request('POST', base, { token: t.token, body: VALID_SERVICE.docker });
    assertSerializedBySchema('POST', '/v1/environments/:envId/services', docker);
    assertServiceClean(docker.body.data.service, 'create');

    const list = await h.request('GET', base, { token: t.token });
    assert.equal(list.status, 200);
    assertSerializedBySchema('GET', '/v1/environments/:envId/services', list);
    assert.ok(list.body.data.services.length >= 2);
    for (const s of list.body.data.services) assertServiceClean(s, 'list');
    // The service with a deployment carries it, still through the deployment's schema.
    const listed = list.body.data.services.find((s: { id: string }) => s.id === serviceId);
    assert.equal(listed.latest_deployment.id, deploymentId);

    const one = await h.request('GET', `${base}/${serviceId}`, { token: t.token });
    assert.equal(one.status, 200);
    assertSerializedBySchema('GET', '/v1/environments/:envId/services/:serviceId', one);
    assertServiceClean(one.body.data.service, 'get');
    assert.equal(one.body.data.service.latest_deployment.id, deploymentId);
    // The connection a service uses is shown (an id, not a secret), through the schema like any field.
    assert.equal(one.body.data.service.installation_id, installationId);

    const patched = await h.request('PATCH', `${base}/${serviceId}`, {
      token: t.token,
      body: { replica_count: 3 },
    });
    assert.equal(patched.status, 200, patched.raw);
    assertSerializedBySchema('PATCH', '/v1/environments/:envId/services/:serviceId', patched);
    assertServiceClean(patched.body.data.service, 'patch');
    assert.equal(patched.body.data.service.installation_id, installationId);
  });

  test('deployment responses (deploy, get, list) leak no internal column', async () => {
    const deployUrl = '/v1/environments/:envId/services/:serviceId/deploy';
    const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
      token: t.token,
      body: {},
    });
    assertSerializedBySchema('POST', deployUrl, deployed);
    assert.deepEqual(Object.keys(deployed.body.data), ['deployment_id']);

    const one = await h.request('GET', `/v1/deployments/${deploymentId}`, { token: t.token });
    assert.equal(one.status, 200);
    assertSerializedBySchema('GET', '/v1/deployments/:deploymentId', one);
    assertDeploymentClean(one.body.data.deployment, 'get');
    assert.equal(one.body.data.deployment.private_instance_id, t.envId);

    const list = await h.request('GET', `/v1/environments/${t.envId}/services/${serviceId}/deployments`, {
      token: t.token,
    });
    assert.equal(list.status, 200);
    assertSerializedBySchema('GET', '/v1/environments/:envId/services/:serviceId/deployments', list);
    assert.equal(list.body.data.deployments.length, 2);
    for (const d of list.body.data.deployments) assertDeploymentClean(d, 'list');
  });

  test('environment, secret and audit responses name only declared fields; sealed values never leave', async () => {
    const envs = await h.request('GET', '/v1/environments', { token: t.token });
    assertSerializedBySchema('GET', '/v1/environments', envs);
    const env = await h.request('GET', `/v1/environments/${t.envId}`, { token: t.token });
    assert.equal(env.status, 200);
    assertSerializedBySchema('GET', '/v1/environments/:envId', env);

    const secretValue = `hidden-${randomUUID()}`;
    const put = await h.request('PUT', `/v1/environments/${t.envId}/services/${serviceId}/secrets`, {
      token: t.token,
      body: {
        secrets: [
          { key: 'PLAIN', value: 'visible' },
          { key: 'TOKEN', value: secretValue, is_sensitive: true },
        ],
      },
    });
    assert.equal(put.status, 200, put.raw);
    assertSerializedBySchema('PUT', '/v1/environments/:envId/services/:serviceId/secrets', put);
    const read = await h.request('GET', `/v1/environments/${t.envId}/services/${serviceId}/secrets`, {
      token: t.token,
    });
    assertSerializedBySchema('GET', '/v1/environments/:envId/services/:serviceId/secrets', read);
    const envPut = await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
      token: t.token,
      body: { secrets: [{ key: 'SHARED', value: 'v' }] },
    });
    assertSerializedBySchema('PUT', '/v1/environments/:envId/secrets', envPut);
    const envRead = await h.request('GET', `/v1/environments/${t.envId}/secrets`, { token: t.token });
    assertSerializedBySchema('GET', '/v1/environments/:envId/secrets', envRead);
    for (const res of [put, read]) {
      assert.equal(res.raw.includes(secretValue), false, 'a sensitive value is write-only');
      assert.equal(res.raw.includes('value_sealed'), false);
      assert.equal(res.raw.includes('scope_id'), false);
      const plain = res.body.data.secrets.find((s: { key: string }) => s.key === 'PLAIN');
      assert.equal(plain.value, 'visible');
    }

    const audit = await h.request('GET', '/v1/audit-logs', { token: t.token });
    assert.equal(audit.status, 200);
    assertSerializedBySchema('GET', '/v1/audit-logs', audit);
    assert.ok(audit.body.data.audit_logs.length > 0);
    assert.equal(audit.raw.includes(secretValue), false, 'the audit log never holds secret values');
  });

  test('account and token responses never carry the token hash', async () => {
    const created = await h.admin('POST', '/accounts', { name: 'serialized', plan: 'starter' });
    assert.equal(created.status, 200);
    assertSerializedBySchema('POST', '/admin/v1/accounts', created);
    const accountId = created.body.data.account.id;
    const issued = await h.admin('POST', `/accounts/${accountId}/api-tokens`);
    assert.equal(issued.status, 200);
    assertSerializedBySchema('POST', '/admin/v1/accounts/:id/api-tokens', issued);
    assert.deepEqual(Object.keys(issued.body.data).sort(), ['api_token', 'token_id']);
    const hash = hashApiToken(issued.body.data.api_token);

    const patched = await h.admin('PATCH', `/accounts/${accountId}`, { plan: 'pro' });
    assertSerializedBySchema('PATCH', '/admin/v1/accounts/:id', patched);
    const listed = await h.admin('GET', '/accounts');
    assertSerializedBySchema('GET', '/admin/v1/accounts', listed);
    const env = await h.admin('POST', `/accounts/${accountId}/environments`, { name: 'e' });
    assertSerializedBySchema('POST', '/admin/v1/accounts/:id/environments', env);
    for (const res of [created, issued, patched, listed, env]) {
      assert.equal(res.raw.includes('token_hash'), false);
      assert.equal(res.raw.includes(hash), false, 'the stored hash never leaves');
    }
    for (const account of listed.body.data.accounts) assert.equal('token_hash' in account, false);
  });
});

describe('hot read paths are one indexed query each', () => {
  let serviceId: string;
  let deploymentId: string;

  before(async () => {
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: VALID_SERVICE.docker,
    });
    serviceId = created.body.data.service.id;
    const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
      token: t.token,
      body: {},
    });
    deploymentId = deployed.body.data.deployment_id;
  });

  /** The plan of `query` with its parameters written in as literals, with sequential scans priced out. */
  async function planOf(query: string, params: string[]): Promise<string> {
    const literal = query.replace(/\$(\d+)/g, (_, n: string) => {
      const value = params[Number(n) - 1];
      assert.ok(value !== undefined, `no value for $${n}`);
      return `'${value.replace(/'/g, "''")}'`;
    });
    return h.deps.store.db.transaction().execute(async (trx) => {
      // A tiny table is cheaper to scan; the point is that a usable index exists.
      await sql`SET LOCAL enable_seqscan = off`.execute(trx);
      const result = await sql.raw<Record<string, string>>(`EXPLAIN ${literal}`).execute(trx);
      return result.rows.map((row) => Object.values(row)[0]).join('\n');
    });
  }

  /** The queries one request runs, the token cache already warm. */
  async function queriesOf(url: string): Promise<string[]> {
    h.queries.length = 0;
    const res = await h.request('GET', url, { token: t.token });
    assert.equal(res.status, 200, res.raw);
    // On Postgres the per-token rate-limit window is a shared upsert (docs/api.md); it is not a read,
    // nor is the token's lookup (cached 5 s).
    return h.queries.filter(
      (query) => !query.includes('rate_limit_windows') && !query.includes('api_tokens'),
    );
  }

  // The first read loads the representation (the queries below); later ones are served from the read
  // cache until a change is announced, so a poll runs at most those queries.
  test('GET /v1/deployments/{id} runs at most one query, and it uses an index on deployments', async () => {
    const url = `/v1/deployments/${deploymentId}`;
    const queries = await queriesOf(url);
    assert.equal(queries.length, 1, `expected one query, ran:\n${queries.join('\n')}`);
    const query = queries[0] as string;
    assert.match(query, /from "deployments"/);
    // Parameter order as Kysely wrote it: id, then account.
    assert.match(query, /"id" = \$1 and "account_id" = \$2/);
    const plan = await planOf(query, [deploymentId, t.accountId]);
    assert.match(plan, /Index (Only )?Scan using \S+ on deployments/, plan);
    assert.ok((await queriesOf(url)).length <= 1, 'a later poll runs at most one query');
  });

  test('GET one service runs at most the scope query (indexed) and the read of its last observation', async () => {
    const url = `/v1/environments/${t.envId}/services/${serviceId}`;
    const queries = await queriesOf(url);
    assert.equal(
      queries.length,
      2,
      `expected 2 queries: (1) the scope query (service + environment + latest deployment + active domain) and (2) the read of what the provider last reported (service_observations), never the provider itself; ran:\n${queries.join('\n')}`,
    );
    assert.ok((await queriesOf(url)).length <= 2, 'a later read runs at most those two');
    const [scope, observed] = queries as [string, string];
    assert.match(scope, /from "services" as "s" inner join "environments"/, 'query 1 is the scope query');
    assert.match(scope, /left join "deployments"/, 'the latest deployment comes in the same query');
    assert.match(scope, /left join "custom_domains"/, 'so does the active custom domain');
    assert.match(observed, /from "service_observations"/, 'query 2 reads the written-back observation');

    assert.match(scope, /"s"\."id" = \$2 and "s"\."environment_id" = \$3 and "s"\."account_id" = \$4/);
    const plan = await planOf(scope, ['deployed', serviceId, t.envId, t.accountId]);
    assert.match(plan, /Index (Only )?Scan using \S+ on services/, plan);
    assert.match(plan, /Index (Only )?Scan using \S+ on environments/, plan);
    const observedPlan = await planOf(observed, [serviceId]);
    assert.match(observedPlan, /Index (Only )?Scan using \S+ on service_observations/, observedPlan);
  });
});

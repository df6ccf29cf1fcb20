import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { ADMIN_TOKEN, type Reply, startHarness, VALID_SERVICE } from '../helpers/harness.ts';
import { isOAuthRoute, oauthErrorProblem } from '../helpers/oauth-errors.ts';
import { registeredRoutes as listRoutes, type Route } from '../helpers/routes.ts';

/**
 * Done means: "No response, for any input, contains a stack trace or a validator's raw error shape."
 * Every route the app registers gets hostile tokens, query strings, path ids, bodies and body fields;
 * every answer is checked by `assertSane`.
 */
// Limits have tests of their own (conventions, auth-limits): here every hostile input must reach the routes.
const h = await startHarness({ rateLimitPerMin: 1_000_000, authFailuresPerMin: 1_000_000 });
after(() => h.close());
const t = await h.tenant();

const UNKNOWN = {
  error_code: 'unknown',
  message: 'Something went wrong. Please try again later',
  errors: null,
};

async function createService(name: string): Promise<string> {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, name },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}
const serviceId = await createService('Sturdy Service');
// DELETE routes get a service of their own, so the other routes keep a live one.
const victimServiceId = await createService('Victim Service');
const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
  token: t.token,
  body: {},
});
const deploymentId: string = deployed.body.data.deployment_id;
// Admin routes act on an account of their own: hostile input must not touch the tenant's plan.
const victimAccountId: string = (await h.admin('POST', '/accounts', { name: 'victim', plan: 'pro' })).body
  .data.account.id;
// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is read as plain JSON
const doc: any = (await h.request('GET', '/v1/openapi.json')).body;

const registeredRoutes = () => listRoutes(h);
const ROUTES = registeredRoutes();
assert.ok(ROUTES.length > 20);

const toOpenApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');
const operationOf = (route: Route) => doc.paths[toOpenApiPath(route.url)]?.[route.method.toLowerCase()];
const isAdmin = (route: Route) => route.url.startsWith('/admin/');
// Signing in needs no token (its own failures are tested in test/http/sessions.test.ts).
const isPublic = (route: Route) =>
  [
    '/health',
    '/ready',
    '/v1/openapi.json',
    '/auth/sign-in',
    '/auth/sign-in-link',
    '/auth/accept-invitation',
    '/auth/session',
    '/auth/passkey-options',
    '/auth/passkey',
    '/auth/device/code',
    '/auth/device/token',
    '/auth/sso/start',
    '/auth/sso/callback',
  ].includes(route.url);
const COMING_SOON = new Set([
  'POST /v1/environments',
  'DELETE /v1/environments/:envId',
  'DELETE /v1/environments/:envId/services/:serviceId/custom-domains/:customDomainId',
]);
const keyOf = (route: Route) => `${route.method} ${route.url}`;

/** The statuses a route may answer: what its operation documents (spec: coming soon is 404 today). */
function documentedStatuses(route: Route): Set<number> {
  if (route.url === '/v1/openapi.json') return new Set([200]);
  if (COMING_SOON.has(keyOf(route))) return new Set([401, 403, 404, 429]);
  const op = operationOf(route);
  assert.ok(op, `${keyOf(route)} is not in the description`);
  return new Set(Object.keys(op.responses).map(Number));
}

function pathFor(route: Route, overrides: Record<string, string> = {}): string {
  const ids: Record<string, string> = {
    envId: t.envId,
    serviceId: route.method === 'DELETE' ? victimServiceId : serviceId,
    deploymentId,
    customDomainId: randomUUID(),
    id: victimAccountId,
    tokenId: randomUUID(), // never revoke a real token
    sessionId: randomUUID(), // never end a real session
    userId: randomUUID(), // never remove a real member
    ...overrides,
  };
  return route.url.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? randomUUID());
}

const authFor = (route: Route) =>
  isAdmin(route) ? { authorization: `Bearer ${ADMIN_TOKEN}` } : { authorization: `Bearer ${t.token}` };

const CODES_OF_STATUS: Record<number, string[]> = {
  401: ['unauthorized'],
  403: ['forbidden'],
  404: ['notfound'],
  409: ['conflict'],
  422: ['validation', 'DOMAIN_VERIFICATION_FAILED'],
  429: ['rate_limited'],
  500: ['unknown', 'validation'],
};

/** Text that only a leaked stack trace, a framework default body or a raw validator error would hold. */
const MARKERS = [
  '    at ',
  '.ts:',
  '.js:',
  'node_modules',
  'Error:',
  'SyntaxError',
  'instancePath',
  'schemaPath',
  '"keyword"',
  'must have required property',
  'must NOT',
  'must match',
  'must be equal to',
  'FST_ERR',
  '"statusCode"',
  'Unexpected token',
];

/** The checks every response passes, whatever was sent. */
function assertSane(route: Route | null, res: Reply, what: string): void {
  const label = `${route ? keyOf(route) : 'unmatched'} <- ${what}: ${res.status} ${res.raw.slice(0, 300)}`;
  // A stream the route documents (GET /v1/events) answers 200 with server-sent events, not JSON; a
  // file (GET /admin/v1/backup) with its media type.
  const type = String(res.headers['content-type']).split(';')[0] as string;
  if (type === 'text/event-stream' || type === 'application/gzip') {
    const streams = route && operationOf(route)?.responses?.['200']?.content?.[type];
    assert.ok(streams, `a stream the route does not document: ${label}`);
    assert.equal(res.status, 200, label);
    assert.ok(res.headers['x-request-id'], `x-request-id on every response: ${label}`);
    return;
  }
  assert.match(String(res.headers['content-type']), /^application\/json/, `JSON content type: ${label}`);
  let body: unknown;
  assert.doesNotThrow(() => {
    body = JSON.parse(res.raw);
  }, `the body is JSON: ${label}`);
  assert.ok(body !== null && typeof body === 'object' && !Array.isArray(body), `a JSON object: ${label}`);
  assert.ok(res.headers['x-request-id'], `x-request-id on every response: ${label}`);
  const allowed = route ? documentedStatuses(route) : new Set([404]);
  assert.ok(
    allowed.has(res.status),
    `status ${res.status} is not documented (${[...allowed].join(', ')}): ${label}`,
  );
  for (const marker of MARKERS)
    assert.equal(res.raw.includes(marker), false, `contains "${marker}": ${label}`);

  if (res.status < 400) return;
  if (route?.url === '/health') {
    assert.deepEqual(body, { message: 'unavailable' }, label);
    return;
  }
  if (isOAuthRoute(route?.url)) {
    assert.equal(oauthErrorProblem(res.status, body), null, label);
    return;
  }
  const error = body as { error_code: unknown; message: unknown; errors: unknown };
  assert.deepEqual(Object.keys(error).sort(), ['error_code', 'errors', 'message'], `error keys: ${label}`);
  assert.ok(CODES_OF_STATUS[res.status]?.includes(error.error_code as string), `error_code: ${label}`);
  assert.equal(typeof error.message, 'string', label);
  assert.ok((error.message as string).length > 0, label);
  assert.doesNotMatch(error.message as string, /^must /, `a validator message without a field: ${label}`);
  if (res.status === 500 && error.error_code === 'unknown') assert.deepEqual(body, UNKNOWN, label);
  if (error.errors === null) return;
  assert.ok(Array.isArray(error.errors), `errors is null or an array: ${label}`);
  assert.ok(error.errors.length > 0, label);
  for (const item of error.errors as Record<string, unknown>[]) {
    assert.deepEqual(Object.keys(item).sort(), ['error', 'field'], `field error keys: ${label}`);
    assert.equal(typeof item.field, 'string', label);
    assert.equal(typeof item.error, 'string', label);
    assert.ok((item.field as string).length > 0, `a field error names its field: ${label}`);
    assert.doesNotMatch(item.error as string, /^must /, `a validator message without a field: ${label}`);
  }
}

/** Runs `assertSane` on many answers and reports every failing one at the end, not just the first. */
class Checks {
  private readonly failures: string[] = [];
  private count = 0;
  check(route: Route | null, res: Reply, what: string, extra?: () => void): void {
    this.count++;
    try {
      assertSane(route, res, what);
      extra?.();
    } catch (error) {
      this.failures.push((error as Error).message.split('\n')[0] as string);
    }
  }
  done(): void {
    assert.ok(this.count > 0);
    const shown = this.failures.slice(0, 25);
    assert.deepEqual(shown, [], `${this.failures.length} of ${this.count} answers failed`);
  }
}

async function send(
  route: Route,
  options: {
    url?: string;
    rawBody?: string | Buffer;
    contentType?: string;
    headers?: Record<string, string>;
    auth?: boolean;
  } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...(options.auth === false ? {} : authFor(route)) };
  if (options.contentType) headers['content-type'] = options.contentType;
  Object.assign(headers, options.headers);
  return h.request(route.method, options.url ?? pathFor(route), {
    rawBody: options.rawBody as string | undefined,
    headers,
  });
}

const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const deepArray = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

/** Values for any field, as raw JSON: wrong types, limits, odd numbers, odd text, nesting, pollution. */
const HOSTILE_VALUES: [string, string][] = [
  ['zero', '0'],
  ['negative', '-1'],
  ['fraction', '1.5'],
  ['negative zero', '-0'],
  ['1e309 (Infinity when parsed)', '1e309'],
  ['-1e309', '-1e309'],
  ['underflow', '1e-400'],
  ['a 30-digit integer', '123456789012345678901234567890'],
  ['true', 'true'],
  ['false', 'false'],
  ['null', 'null'],
  ['empty string', '""'],
  ['blank string', '"   "'],
  ['short string', '"x"'],
  ['a 300 KB string', JSON.stringify('x'.repeat(300_000))],
  ['empty array', '[]'],
  ['mixed array', '[1,"a",null,{}]'],
  ['array of strings', '["a","b"]'],
  ['empty object', '{}'],
  ['nested object', '{"a":{"b":[{"c":null}]}}'],
  ['__proto__ object', '{"__proto__":{"polluted":1}}'],
  ['constructor object', '{"constructor":{"prototype":{"polluted":1}}}'],
  ['lone surrogate', '"\\ud800"'],
  ['unicode', JSON.stringify('💥 ünïcødé \u202e 漢字 \u200b')],
  ['path traversal', JSON.stringify('../../etc/passwd')],
  ['SQL', JSON.stringify("'; DROP TABLE services; --")],
  ['HTML', JSON.stringify('<script>alert(1)</script>')],
  ['a uuid', JSON.stringify(randomUUID())],
  ['a date', '"2024-01-01T00:00:00Z"'],
  ['a 1000-deep object', deepObject(1000)],
  ['a 1000-deep array', deepArray(1000)],
];

/** A valid body per route, so that one field at a time can be made hostile. */
function baseBody(route: Route): Record<string, unknown> {
  switch (keyOf(route)) {
    case 'POST /v1/environments/:envId/services':
      return { ...VALID_SERVICE.docker, name: 'Robust App' };
    case 'PUT /v1/environments/:envId/secrets':
    case 'PUT /v1/environments/:envId/services/:serviceId/secrets':
      return { secrets: [{ key: 'K', value: 'v' }] };
    case 'POST /admin/v1/accounts':
    case 'POST /admin/v1/accounts/:id/environments':
      return { name: 'robust' };
    default:
      return {};
  }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema nodes of the description
function resolve(schema: any): any {
  if (schema?.$ref) return resolve(doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]);
  return schema;
}

/** Every body field a route declares, with the fields of array items (`secrets[0].key`). */
function bodyFields(route: Route): { path: (string | number)[]; name: string }[] {
  const schema = resolve(operationOf(route)?.requestBody?.content?.['application/json']?.schema);
  if (!schema?.properties) return [];
  const fields: { path: (string | number)[]; name: string }[] = [];
  for (const [name, property] of Object.entries(schema.properties as Record<string, unknown>)) {
    fields.push({ path: [name], name });
    const items = resolve(resolve(property)?.items);
    if (items?.properties)
      for (const inner of Object.keys(items.properties))
        fields.push({ path: [name, 0, inner], name: `${name}[0].${inner}` });
  }
  return fields;
}

/** The base body with the value at `path` replaced by a raw JSON fragment. */
function bodyWith(base: Record<string, unknown>, path: (string | number)[], fragment: string): string {
  const PLACEHOLDER = `__hostile_${randomUUID()}__`;
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let node: Record<string | number, unknown> = copy;
  for (const [i, step] of path.entries()) {
    if (i === path.length - 1) node[step] = PLACEHOLDER;
    else {
      node[step] ??= typeof path[i + 1] === 'number' ? [{ key: 'K' }] : {};
      node = node[step] as Record<string | number, unknown>;
    }
  }
  return JSON.stringify(copy).replace(JSON.stringify(PLACEHOLDER), fragment);
}

/** Whole bodies: [what, raw, content type]. */
const HOSTILE_BODIES: [string, string | Buffer, string | undefined][] = [
  ['zero bytes', '', 'application/json'],
  ['truncated JSON', '{"name": ', 'application/json'],
  ['a lone brace', '{', 'application/json'],
  ['null', 'null', 'application/json'],
  ['a number', '1e309', 'application/json'],
  ['a string', '"hello"', 'application/json'],
  ['an array where an object is expected', '[]', 'application/json'],
  ['an array of objects', '[{}]', 'application/json'],
  ['an empty object', '{}', 'application/json'],
  ['a 10000-deep object', deepObject(10_000), 'application/json'],
  ['a 10000-deep array', deepArray(10_000), 'application/json'],
  ['a __proto__ key', '{"__proto__":{"polluted":1},"name":"x"}', 'application/json'],
  ['a constructor.prototype key', '{"constructor":{"prototype":{"polluted":1}}}', 'application/json'],
  ['duplicate keys', '{"name":"a","name":{"x":1}}', 'application/json'],
  [
    '10000 keys',
    JSON.stringify(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]))),
    'application/json',
  ],
  ['a null byte key', '{"\\u0000":1}', 'application/json'],
  ['NaN', '{"port": NaN}', 'application/json'],
  ['trailing garbage', '{} {}', 'application/json'],
  ['a BOM', '\ufeff{}', 'application/json'],
  [
    'invalid UTF-8 bytes',
    Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x22, 0x7d]),
    'application/json',
  ],
  ['a 2 MB body', JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), 'application/json'],
  ['text/plain', '{}', 'text/plain'],
  ['form encoded', 'name=x&source=y', 'application/x-www-form-urlencoded'],
  [
    'multipart',
    '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--',
    'multipart/form-data; boundary=x',
  ],
  ['XML', '<service name="x"/>', 'application/xml'],
  ['JSON declared as UTF-16', '{}', 'application/json; charset=utf-16'],
  ['a mangled content type', '{}', 'application/json;;;=='],
  ['no content type', '{}', undefined],
];

const HOSTILE_QUERIES = [
  '?limit=abc',
  '?limit=-1',
  '?limit=0',
  '?limit=101',
  '?limit=1.5',
  '?limit=1e309',
  '?limit=',
  '?limit=%00',
  '?limit=1&limit=2',
  '?limit[]=1',
  '?cursor=%%%',
  '?cursor=abc',
  '?cursor=',
  `?cursor=${'x'.repeat(5000)}`,
  `?cursor=${Buffer.from('{"created_at":"not a date","id":"not a uuid"}').toString('base64url')}`,
  `?cursor=${Buffer.from(JSON.stringify(['1970-01-01', "'; DROP TABLE x"])).toString('base64url')}`,
  '?cursor=a&cursor=b',
  '?__proto__[polluted]=1',
  '?constructor[prototype][polluted]=1',
  '?%E0%A4%A=1',
  '?a=%ff%fe%fd',
  `?${'q=1&'.repeat(5000)}`,
];

/** Path ids that are not ids; with a valid token they are simply not found. */
const HOSTILE_IDS = [
  'not-a-uuid',
  '0',
  '-1',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  '%00',
  '%20',
  '%C3%A9',
  '%F0%9F%92%A5',
  '%2F',
  `${randomUUID()}%00`,
  `${randomUUID()}x`,
  `'%20OR%201=1--`,
  'x'.repeat(100),
];

describe('every route, every hostile input', () => {
  for (const route of ROUTES) {
    describe(keyOf(route), () => {
      test('no token, bad tokens and odd headers', async () => {
        const checks = new Checks();
        const cases: [string, Record<string, string>][] = [
          ['no token', {}],
          ['a non-uuid token', { authorization: 'Bearer abc' }],
          ['an unknown token', { authorization: `Bearer ${randomUUID()}` }],
          ['a 10 KB token', { authorization: `Bearer ${'a'.repeat(10_000)}` }],
          ['a latin-1 token', { authorization: 'Bearer é' }],
          ['another scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
          ['two tokens', { authorization: `Bearer ${randomUUID()} ${randomUUID()}` }],
        ];
        for (const [what, headers] of cases) {
          const res = await h.request(route.method, pathFor(route), { headers });
          checks.check(route, res, what, () => {
            if (!isPublic(route)) assert.equal(res.status, 401, `${what}: ${res.raw}`);
          });
        }
        for (const [what, headers] of [
          ['a 10 KB x-request-id', { 'x-request-id': 'r'.repeat(10_000) }],
          ['accept: text/html', { accept: 'text/html' }],
          ['accept: application/xml', { accept: 'application/xml' }],
        ] as [string, Record<string, string>][]) {
          checks.check(route, await send(route, { headers }), what);
        }
        checks.done();
      });

      test('hostile query strings', async () => {
        const checks = new Checks();
        for (const query of HOSTILE_QUERIES) {
          const res = await send(route, { url: pathFor(route) + query });
          checks.check(route, res, `query ${query.slice(0, 60)}`);
        }
        checks.done();
      });

      const params = [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1] as string);
      if (params.length > 0)
        test('hostile path ids are not found', async () => {
          const checks = new Checks();
          for (const param of params) {
            for (const id of HOSTILE_IDS) {
              const res = await send(route, { url: pathFor(route, { [param]: id }) });
              checks.check(route, res, `${param} = ${id.slice(0, 40)}`, () =>
                assert.equal(res.status, 404, `${param} = ${id}: ${res.raw}`),
              );
            }
          }
          checks.done();
        });

      test('hostile bodies', async () => {
        const checks = new Checks();
        for (const [what, rawBody, contentType] of HOSTILE_BODIES) {
          const res = await send(route, { rawBody, contentType });
          checks.check(route, res, `body: ${what}`);
        }
        checks.done();
      });

      const fields = bodyFields(route);
      if (fields.length > 0)
        test(`wrong types and hostile values for each of its ${fields.length} body fields`, async () => {
          const checks = new Checks();
          const base = baseBody(route);
          for (const field of fields) {
            for (const [what, fragment] of HOSTILE_VALUES) {
              const res = await send(route, {
                rawBody: bodyWith(base, field.path, fragment),
                contentType: 'application/json',
              });
              checks.check(route, res, `${field.name} = ${what}`);
            }
          }
          checks.done();
        });
    });
  }

  test('routes the app does not have answer 404 in the error shape', async () => {
    for (const [method, url] of [
      ['POST', '/health'],
      // GET / is the console (src/api/console.ts); nothing else is answered outside /v1 and /admin/v1.
      ['POST', '/'],
      ['GET', '/assets/nothing.js'],
      ['GET', '/v2/environments'],
      ['PUT', '/v1/environments'],
      ['GET', `/v1/${'a/'.repeat(50_000)}`],
      ['GET', `/v1/environments/${t.envId}/services/${serviceId}/x/y/z`],
      ['OPTIONS', '/v1/environments'],
    ] as const) {
      const res = await h.request(method, url, { token: t.token });
      assertSane(null, res, `${method} ${url.slice(0, 60)}`);
      assert.equal(res.status, 404);
    }
  });

  test('nothing polluted the prototype of objects', () => {
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
  });
});

describe('hostile paths the router refuses before the app sees them', () => {
  const paramRoutes = ROUTES.filter((r) => r.url.includes('/:'));

  // Contract: unknown routes, and path ids that are not UUIDs, are 404 notfound in the error shape;
  // never a framework default body.
  test('invalid percent-encoding in a path is 404 notfound in the error shape', async () => {
    const failures: string[] = [];
    const cases: [Route | null, string][] = [
      [null, '/v1/environ%ZZments'],
      [null, '/v1/%'],
    ];
    for (const route of paramRoutes)
      for (const bad of ['%E0%A4%A', '%zz', '%'])
        cases.push([
          route,
          pathFor(route, { [(/:(\w+)/.exec(route.url) as RegExpExecArray)[1] as string]: bad }),
        ]);
    for (const [route, url] of cases) {
      const res = await h.request(route?.method ?? 'GET', url, { headers: route ? authFor(route) : {} });
      try {
        assertSane(route, res, url);
        assert.equal(res.status, 404);
      } catch {
        failures.push(`${route?.method ?? 'GET'} ${url} -> ${res.status} ${res.raw.slice(0, 120)}`);
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${cases.length} answers are not a 404 error body`);
  });

  test('a path id longer than the router allows is 404 notfound in the error shape', async () => {
    const failures: string[] = [];
    let count = 0;
    for (const route of paramRoutes) {
      for (const long of ['a'.repeat(101), `${randomUUID()}${'0'.repeat(100)}`, 'b'.repeat(100_000)]) {
        const param = (/:(\w+)/.exec(route.url) as RegExpExecArray)[1] as string;
        const res = await send(route, { url: pathFor(route, { [param]: long }) });
        count++;
        try {
          assertSane(route, res, `${param} of ${long.length} characters`);
          assert.equal(res.status, 404);
        } catch {
          failures.push(
            `${keyOf(route)} with ${long.length} characters -> ${res.status} ${res.raw.slice(0, 100)}`,
          );
        }
      }
    }
    assert.deepEqual(failures, [], `${failures.length} of ${count} answers are not a 404 error body`);
  });
});

describe('null bytes', () => {
  // PostgreSQL text cannot hold U+0000. A careful API refuses it as a field error (422) or stores it
  // safely; it never turns a client's input into a 500.
  test('a null byte in a string field is stored or refused as a field error, never a 500', async () => {
    const env = `/v1/environments/${t.envId}`;
    const svc = `${env}/services/${serviceId}`;
    const SERVICE = '/v1/environments/:envId/services/:serviceId';
    const cases: [route: string, url: string, field: string, body: unknown][] = [
      [
        `PUT ${SERVICE}/secrets`,
        `${svc}/secrets`,
        'secrets[0].key',
        { secrets: [{ key: 'A\u0000B', value: 'v' }] },
      ],
      [
        `PUT ${SERVICE}/secrets`,
        `${svc}/secrets`,
        'secrets[0].value',
        { secrets: [{ key: 'K', value: 'v\u0000' }] },
      ],
      [
        `PUT ${SERVICE}/secrets`,
        `${svc}/secrets`,
        'secrets[0].description',
        { secrets: [{ key: 'K', description: 'd\u0000' }] },
      ],
      [
        `PUT ${SERVICE}/secrets`,
        `${svc}/secrets`,
        'secrets[0].chart_default_val',
        { secrets: [{ key: 'K', chart_default_val: '\u0000' }] },
      ],
      [
        'PUT /v1/environments/:envId/secrets',
        `${env}/secrets`,
        'secrets[0].key',
        { secrets: [{ key: 'K\u0000' }] },
      ],
      [`POST ${SERVICE}/deploy`, `${svc}/deploy`, 'note', { note: 'n\u0000' }],
      [`POST ${SERVICE}/deploy`, `${svc}/deploy`, 'docker_image_tag', { docker_image_tag: 'v1\u0000' }],
      [`PATCH ${SERVICE}`, svc, 'run_command', { run_command: 'run\u0000' }],
      [`PATCH ${SERVICE}`, svc, 'docker_registry', { docker_registry: 'r\u0000' }],
      [
        'POST /v1/environments/:envId/services',
        `${env}/services`,
        'run_command',
        { ...VALID_SERVICE.docker, run_command: 'run\u0000' },
      ],
      [
        'POST /v1/environments/:envId/services',
        `${env}/services`,
        'helm_values_yml',
        { ...VALID_SERVICE.helm, helm_values_yml: 'a: b\u0000' },
      ],
    ];
    const failures: string[] = [];
    for (const [key, url, field, body] of cases) {
      const route = ROUTES.find((r) => keyOf(r) === key);
      assert.ok(route, key);
      const res = await h.request(route.method, url, { token: t.token, body });
      assertSane(route, res, `${field} with a null byte`);
      const named = res.status === 422 && res.body.errors?.some((e: { field: string }) => e.field === field);
      if (!(res.status === 200 || named))
        failures.push(`${key} ${field} -> ${res.status} ${res.raw.slice(0, 120)}`);
    }
    for (const [url, field, body] of [
      ['/accounts', 'name', { name: 'acct\u0000' }],
      [`/accounts/${victimAccountId}/environments`, 'name', { name: 'env\u0000' }],
    ] as const) {
      const res = await h.admin('POST', url, body);
      const named = res.status === 422 && res.body.errors?.some((e: { field: string }) => e.field === field);
      if (!(res.status === 200 || named))
        failures.push(`admin POST ${url} ${field} -> ${res.status} ${res.raw.slice(0, 120)}`);
    }
    assert.deepEqual(failures, [], 'client input answered as a server failure');
  });
});

describe('an internal failure', () => {
  test('answers 500 unknown with the fixed message, and /health answers 503 unavailable', async (ctx) => {
    const broken = await startHarness({ rateLimitPerMin: 1000 });
    ctx.after(() => broken.close());
    const tenant = await broken.tenant();
    // Warm the token cache, so that the failure comes from the route's own query, not from auth.
    const warm = await broken.request('GET', '/v1/environments', { token: tenant.token });
    assert.equal(warm.status, 200);
    assert.deepEqual((await broken.request('GET', '/health')).body, { message: 'ok' });

    await broken.deps.store.close();

    const cases: [string, string, unknown][] = [
      ['GET', '/v1/environments', undefined],
      ['GET', `/v1/environments/${tenant.envId}`, undefined],
      ['GET', `/v1/environments/${tenant.envId}/services`, undefined],
      ['GET', `/v1/deployments/${randomUUID()}`, undefined],
      ['GET', '/v1/audit-logs', undefined],
      ['POST', `/v1/environments/${tenant.envId}/services`, VALID_SERVICE.docker],
      ['PUT', `/v1/environments/${tenant.envId}/secrets`, { secrets: [] }],
    ];
    for (const [method, url, body] of cases) {
      const res = await broken.request(method, url, { token: tenant.token, body });
      assert.equal(res.status, 500, `${method} ${url}: ${res.raw}`);
      assert.deepEqual(res.body, UNKNOWN, `${method} ${url}`);
      assert.ok(res.headers['x-request-id']);
      for (const marker of MARKERS)
        assert.equal(res.raw.includes(marker), false, `${url} contains ${marker}`);
    }
    // A token the cache has not seen needs the database: still a 500, never a stack or a 401.
    const cold = await broken.request('GET', '/v1/environments', { token: randomUUID() });
    assert.equal(cold.status, 500);
    assert.deepEqual(cold.body, UNKNOWN);
    const admin = await broken.admin('GET', '/accounts');
    assert.equal(admin.status, 500);
    assert.deepEqual(admin.body, UNKNOWN);

    const health = await broken.request('GET', '/health');
    assert.equal(health.status, 503);
    assert.deepEqual(health.body, { message: 'unavailable' });
  });
});

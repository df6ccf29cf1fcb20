import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { ADMIN_TOKEN, type Reply, startHarness, VALID_SERVICE } from '../helpers/harness.ts';
import { isOAuthRoute, oauthErrorProblem } from '../helpers/oauth-errors.ts';
import { malformedRequests, type RawResponse, rawRequest, sendRaw } from '../helpers/raw-http.ts';
import { type Route, registeredRoutes } from '../helpers/routes.ts';

/**
 * Property-based fuzzing of every registered route (issue 17: "nothing a bad request can break"):
 * malformed bodies, query strings (cursors included), headers and path ids through the app, and raw
 * malformed HTTP over a real socket. Whatever is sent, no answer is a 5xx other than the spec's two
 * (500 `validation` for a business rule, and the create-then-deploy partial failure), every error is in
 * the spec's shape, and the server is healthy afterwards. Seeded, so a failure replays; set
 * BERTH_FUZZ_SEED to explore other inputs. Bounded by time as well as by runs.
 */
const SEED = Number(process.env.BERTH_FUZZ_SEED ?? 17);
const TIME_LIMIT_MS = 50_000;

// Verification asks a DNS server that is not there: an answer at once, no network.
// Failed-auth limits have tests of their own (auth-limits): here every hostile input must reach the routes.
const h = await startHarness({
  rateLimitPerMin: 10_000_000,
  authFailuresPerMin: 10_000_000,
  dnsServers: ['127.0.0.1:9'],
});
after(() => h.close());
const t = await h.tenant();
await h.app.listen({ port: 0, host: '127.0.0.1' });

const env = `/v1/environments/${t.envId}`;
async function create(name: string): Promise<string> {
  const res = await h.request('POST', `${env}/services`, {
    token: t.token,
    body: { ...VALID_SERVICE.docker, name },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.service.id;
}
const serviceId = await create('Fuzzed Service');
// DELETE routes get services of their own, so the other routes mostly see a live one.
const victims = [await create('Victim One'), await create('Victim Two')];
const deploymentId = (
  await h.request('POST', `${env}/services/${serviceId}/deploy`, { token: t.token, body: {} })
).body.data.deployment_id as string;
const customDomainId = (
  await h.request('POST', `${env}/services/${serviceId}/custom-domains`, {
    token: t.token,
    body: { domain: 'fuzz.example.com' },
  })
).body.data.custom_domain.id as string;
for (let i = 0; i < 3; i++)
  await h.request('POST', `${env}/services/${serviceId}/deploy`, { token: t.token, body: {} });
const realCursor = (
  await h.request('GET', `${env}/services/${serviceId}/deployments?limit=1`, { token: t.token })
).body.data.next_cursor as string;
assert.ok(realCursor);
// Admin routes act on an account of their own: fuzzed input must not change the tenant's plan.
const victimAccount = (await h.admin('POST', '/accounts', { name: 'victim', plan: 'pro' })).body.data.account
  .id as string;

const ROUTES = registeredRoutes(h);
const keyOf = (route: Route) => `${route.method} ${route.url}`;
const CREATE = 'POST /v1/environments/:envId/services';

// --- what may be sent -------------------------------------------------------------------------------

const text = fc.string({ unit: 'binary', maxLength: 40 });
const hostileText = fc.oneof(
  text,
  fc.constantFrom(
    '',
    ' ',
    '0',
    '-1',
    'null',
    '__proto__',
    'constructor',
    '%',
    '%zz',
    '%E0%A4%A',
    '../..',
    'x'.repeat(300),
  ),
);
/** Header values a client library lets through (raw bytes are the raw-HTTP part's business). */
const headerText = fc
  .string({ unit: 'grapheme-ascii', maxLength: 60 })
  .map((s) => s.replace(/[^\x20-\x7e]/g, ''));

const idFor = (route: Route, param: string) =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: fc.constant(
        (
          {
            envId: t.envId,
            serviceId: route.method === 'DELETE' ? (victims[0] as string) : serviceId,
            deploymentId,
            customDomainId,
            id: victimAccount,
          } as Record<string, string>
        )[param] ?? randomUUID(),
      ),
    },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 1, arbitrary: hostileText.map(encodeURIComponent) },
  );

const isoDate = fc
  .date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true })
  .map((d) => d.toISOString());
/** A calendar date as text, often one that does not exist (February 30th, month 13, day 0). */
const calendarDate = fc
  .tuple(
    fc.integer({ min: 0, max: 9999 }),
    fc.integer({ min: 0, max: 13 }),
    fc.oneof(fc.integer({ min: 28, max: 32 }), fc.integer({ min: 0, max: 32 })),
  )
  .map(([y, m, d]) => `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}T00:00:00.000Z`);
function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}
/** Cursor-like text: real ones, impossible calendar dates, broken halves, plain garbage. */
const cursor = fc.oneof(
  { weight: 1, arbitrary: fc.constant(realCursor) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.oneof(
          { weight: 1, arbitrary: isoDate },
          { weight: 3, arbitrary: calendarDate },
          { weight: 1, arbitrary: text },
        ),
        fc.oneof({ weight: 3, arbitrary: fc.uuid() }, { weight: 1, arbitrary: text }),
        fc.constantFrom('|', '|', '|', '||', ''),
      )
      .map(([date, id, sep]) => Buffer.from(`${date}${sep}${id}`).toString('base64url')),
  },
  { weight: 1, arbitrary: hostileText },
);
/** Event ids and log cursors: bigint sequence numbers, around and past what PostgreSQL holds. */
const seqText = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String),
  fc.constantFrom(
    '0',
    '-1',
    '9223372036854775807',
    '9223372036854775808',
    '9999999999999999999',
    '18446744073709551616',
    '00000000000000000001',
    '1e3',
    '0x10',
    ' 1',
  ),
);
const queryValue = fc.oneof(
  { weight: 3, arbitrary: cursor },
  { weight: 2, arbitrary: seqText },
  fc.integer().map(String),
  fc.double().map(String),
  fc.constantFrom('', '1', '100', '101', '1e309', 'NaN', '[]'),
  hostileText,
);
const queryKey = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('limit', 'cursor', 'last_event_id', 'follow', 'arn') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('limit[]', 'cursor[x]', '__proto__', 'constructor[prototype]', ''),
  },
  { weight: 1, arbitrary: text },
);
const query = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .array(fc.tuple(queryKey, queryValue, fc.boolean()), { maxLength: 4 })
      .map((pairs) =>
        pairs.length === 0
          ? ''
          : `?${pairs.map(([k, v, encode]) => (encode ? `${encodeURIComponent(k)}=${encodeURIComponent(v)}` : `${k}=${v}`)).join('&')}`,
      ),
  },
  // A well-formed log or event query around a sequence number, so that it reaches the handler.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('cursor', 'last_event_id'), seqText, fc.boolean())
      .map(([key, seq, follow]) => `?${key}=${encodeURIComponent(seq)}${follow ? '&follow=true' : ''}`),
  },
  // A well-formed query around a hostile cursor, so that the cursor itself reaches the handler.
  {
    weight: 1,
    arbitrary: fc
      .tuple(cursor, fc.option(fc.integer({ min: 1, max: 100 })))
      .map(([c, limit]) => `?cursor=${encodeURIComponent(c)}${limit === null ? '' : `&limit=${limit}`}`),
  },
);

const deep = (depth: number, array: boolean) =>
  array ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const nesting = fc.tuple(fc.integer({ min: 30, max: 20_000 }), fc.boolean()).map(([d, a]) => deep(d, a));

/** A body the route accepts, so that one field at a time can go wrong. */
function baseBody(route: Route): Record<string, unknown> {
  switch (keyOf(route)) {
    case CREATE:
      return { ...VALID_SERVICE.docker, name: 'Fuzz App' };
    case 'POST /v1/environments/:envId/services/:serviceId/custom-domains':
      return { domain: 'shop.example.org' };
    case 'PUT /v1/environments/:envId/secrets':
    case 'PUT /v1/environments/:envId/services/:serviceId/secrets':
      return { secrets: [{ key: 'K', value: 'v' }] };
    case 'POST /admin/v1/accounts':
    case 'POST /admin/v1/accounts/:id/environments':
      return { name: 'fuzz' };
    default:
      return {};
  }
}

const FIELD_NAMES = [
  ...new Set([
    ...Object.keys(VALID_SERVICE.docker),
    ...Object.keys(VALID_SERVICE.github),
    ...Object.keys(VALID_SERVICE.helm),
    'ops_json',
    'secrets',
    'deploy_now',
    'commit_id',
    'docker_image_tag',
    'preview',
    'pr_number',
    'domain',
    'plan',
    'features',
  ]),
];

/** Raw JSON for one field: any JSON value, deep nesting, or text that is not JSON at all. */
const fieldValue = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 1, arbitrary: nesting },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'NaN',
      '1e309',
      '-0',
      '"\\ud800"',
      '{"__proto__":{"polluted":1}}',
      '[{"key":"K"}]',
    ),
  },
);

const bodyFor = (route: Route) =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant(undefined) },
    // The route's own body with fields replaced, added or dropped.
    {
      weight: 6,
      arbitrary: fc
        .tuple(
          fc.array(fc.tuple(fc.constantFrom(...FIELD_NAMES), fieldValue), { maxLength: 3 }),
          fc.subarray(Object.keys(baseBody(route))),
        )
        .map(([changes, dropped]) => {
          const base = baseBody(route);
          for (const key of dropped) delete base[key];
          const marks = changes.map(([key], i) => {
            base[key] = `__fuzz_${i}__`;
            return key;
          });
          let json = JSON.stringify(base);
          changes.forEach(([, raw], i) => {
            if (marks[i] !== undefined) json = json.replace(`"__fuzz_${i}__"`, raw);
          });
          return json;
        }),
    },
    { weight: 2, arbitrary: fc.json({ maxDepth: 5 }) },
    { weight: 1, arbitrary: nesting },
    // Truncated or corrupted JSON.
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constant(JSON.stringify(baseBody(route))),
          fc.nat(),
          fc.string({ unit: 'binary', maxLength: 3 }),
        )
        .map(([json, at, junk]) => json.slice(0, at % (json.length + 1)) + junk),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)) },
  );

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      undefined,
      'application/json; charset=utf-8',
      'application/json; charset=utf-16',
      'application/json;;;==',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'APPLICATION/JSON',
    ),
  },
  { weight: 1, arbitrary: headerText },
);

const authFor = (route: Route) =>
  fc.oneof(
    {
      weight: 8,
      arbitrary: fc.constant(`Bearer ${route.url.startsWith('/admin/') ? ADMIN_TOKEN : t.token}`),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constant(undefined),
        fc.uuid().map((u) => `Bearer ${u}`),
        headerText.map((s) => `Bearer ${s}`),
        headerText,
      ),
    },
  );

const extraHeaders = fc.record(
  {
    'x-request-id': headerText,
    'idempotency-key': headerText,
    accept: fc.constantFrom('text/html', 'application/xml', '*/*', ''),
    'accept-encoding': fc.constantFrom('gzip', 'br', 'identity;q=0', ''),
    'content-encoding': fc.constantFrom('gzip', 'deflate', 'x-unknown'),
    'last-event-id': fc.oneof(seqText, headerText),
  },
  { requiredKeys: [] },
);

interface Sent {
  route: Route;
  url: string;
  headers: Record<string, string>;
  body: string | Buffer | undefined;
}

// Paginated lists read the query string: they get a larger share.
const PAGINATED = ROUTES.filter(
  (r) => r.method === 'GET' && /(services|deployments|audit-logs|logs|events)$/.test(r.url),
);
const request = fc
  .oneof(
    { weight: 3, arbitrary: fc.constantFrom(...ROUTES) },
    { weight: 1, arbitrary: fc.constantFrom(...PAGINATED) },
  )
  .chain((route) => {
    const params = [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1] as string);
    return fc.record({
      route: fc.constant(route),
      ids: fc.tuple(...params.map((p) => idFor(route, p))),
      query,
      auth: authFor(route),
      type: contentType,
      extra: extraHeaders,
      body: bodyFor(route),
    });
  })
  .map(({ route, ids, query: q, auth, type, extra, body }): Sent => {
    let i = 0;
    const url = route.url.replace(/:(\w+)/g, () => ids[i++] as string) + q;
    const headers: Record<string, string> = { ...extra };
    if (auth !== undefined) headers.authorization = auth;
    if (type !== undefined && body !== undefined) headers['content-type'] = type;
    return { route, url, headers, body };
  });

// --- what every answer must be ----------------------------------------------------------------------

const CODES_OF_STATUS: Record<number, string[]> = {
  // What the HTTP parser refuses (malformed framing, late or oversized requests; docs/api.md).
  400: ['validation'],
  408: ['validation'],
  417: ['validation'],
  431: ['validation'],
  401: ['unauthorized'],
  403: ['forbidden'],
  404: ['notfound'],
  409: ['conflict'],
  422: ['validation', 'DOMAIN_VERIFICATION_FAILED'],
  429: ['rate_limited'],
  500: ['validation', 'unknown'],
};
const PARTIAL_FAILURE = 'Service created successfully, but failed to deploy the service';

/** The spec's error body; returns a reason it is not, or null. */
function errorShapeProblem(status: number, body: unknown): string | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'not a JSON object';
  const { error_code, message, errors, ...rest } = body as Record<string, unknown>;
  if (Object.keys(rest).length > 0) return `extra keys ${Object.keys(rest).join(', ')}`;
  if (!CODES_OF_STATUS[status]?.includes(error_code as string)) return `error_code ${String(error_code)}`;
  if (typeof message !== 'string' || message.length === 0) return 'no message';
  if (errors === null) return null;
  if (!Array.isArray(errors) || errors.length === 0) return 'errors is neither null nor a non-empty array';
  for (const item of errors as Record<string, unknown>[]) {
    const keys = Object.keys(item ?? {})
      .sort()
      .join(',');
    if (
      keys !== 'error,field' ||
      typeof item.field !== 'string' ||
      !item.field ||
      typeof item.error !== 'string'
    )
      return `a malformed field error ${JSON.stringify(item)}`;
  }
  return null;
}

/** Routes whose good answer is a stream that lasts (server-sent events): the harness reads its head. */
const STREAMING = new Set([
  'GET /v1/events',
  'GET /v1/deployments/:deploymentId/logs',
  'GET /v1/environments/:envId/services/:serviceId/logs',
]);
const isStream = (res: Reply) => String(res.headers['content-type']).startsWith('text/event-stream');

/** Why an answer breaks the rules, or null. */
function problemOf(route: Route, res: Reply): string | null {
  if (!res.headers['x-request-id']) return 'no x-request-id';
  if (isStream(res)) {
    return STREAMING.has(keyOf(route)) && res.status === 200 ? null : `a ${res.status} stream`;
  }
  // A backup's good answer is its gzip file (routes/admin.ts); its errors are JSON like any other.
  if (keyOf(route) === 'GET /admin/v1/backup' && res.status === 200) {
    return String(res.headers['content-type']) === 'application/gzip' ? null : 'a backup that is not gzip';
  }
  if (!String(res.headers['content-type']).startsWith('application/json')) return 'not JSON';
  let body: unknown;
  try {
    body = JSON.parse(res.raw);
  } catch {
    return 'a body that is not JSON';
  }
  if (route.url === '/health') return res.status === 200 ? null : `health answered ${res.status}`;
  if (res.status >= 500) {
    const { error_code, message } = body as { error_code?: string; message?: string };
    const allowed =
      res.status === 500 &&
      (error_code === 'validation' ||
        (keyOf(route) === CREATE && error_code === 'unknown' && message === PARTIAL_FAILURE));
    if (!allowed) return `a ${res.status} the spec does not call for`;
  }
  if (res.status >= 400 && isOAuthRoute(route.url)) return oauthErrorProblem(res.status, body);
  return res.status >= 400 ? errorShapeProblem(res.status, body) : null;
}

// --- the properties ---------------------------------------------------------------------------------

test('malformed bodies, queries, cursors, headers and ids on every route: no 5xx, errors in the spec shape', async () => {
  const seen = new Set<string>();
  await fc.assert(
    fc.asyncProperty(request, async (sent) => {
      seen.add(keyOf(sent.route));
      const res = await h.request(sent.route.method, sent.url, {
        headers: sent.headers,
        rawBody: sent.body as string | undefined,
      });
      const problem = problemOf(sent.route, res);
      assert.equal(
        problem,
        null,
        `${sent.route.method} ${sent.url.slice(0, 200)} -> ${res.status} ${res.raw.slice(0, 300)}`,
      );
    }),
    { seed: SEED, numRuns: 3000, interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false },
  );
  // Every route was reached, however few runs the time allowed.
  assert.deepEqual(
    ROUTES.map(keyOf).filter((k) => !seen.has(k)),
    [],
  );
});

/** Raw requests, each complete: every one is answered, never with a 5xx, and errors in the spec shape. */
const rawProblem = (res: RawResponse): string | null => {
  if (!Number.isInteger(res.status)) return 'no answer';
  if (res.status >= 500) return `a ${res.status}`;
  if (!res.headers['x-request-id']) return 'no x-request-id';
  if (res.status < 400) return null;
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    return 'a body that is not JSON';
  }
  return errorShapeProblem(res.status, body);
};

const HOST: [string, string][] = [['host', 'localhost']];
const rawHeader = fc.oneof(
  fc.tuple(
    fc.constantFrom(
      'content-length',
      'transfer-encoding',
      'content-type',
      'host',
      'authorization',
      'expect',
      'connection',
    ),
    fc.constantFrom(
      '0',
      '2',
      '-1',
      'chunked',
      'chunked, identity',
      'gzip, chunked',
      'application/json',
      '100-continue',
      '200-ok',
      'close',
      '',
      ' 2',
      '2 2',
      `Bearer ${t.token}`,
    ),
  ),
  fc.tuple(
    fc.constantFrom('x-a', 'x bad', 'x-a\u0000', ' x-folded', 'x:y'),
    fc.string({ unit: 'binary-ascii', maxLength: 20 }).map((s) => s.replace(/[\r\n]/g, '')),
  ),
);

test('raw malformed HTTP on every route: no 5xx, and Berth answers in the spec shape', async () => {
  const failures: string[] = [];
  // The fixed shapes first (duplicate lengths, CL+TE, NUL, huge headers), on every route.
  for (const route of ROUTES) {
    for (const { name, raw } of malformedRequests(
      route.url.replace(/:(\w+)/g, () => randomUUID()),
      t.token,
    )) {
      const problem = rawProblem(await sendRaw(h.app, raw, 3000));
      if (problem) failures.push(`${keyOf(route)} <- ${name}: ${problem}`);
    }
  }
  assert.deepEqual(failures, []);
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...ROUTES),
      fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'G ET', 'FOO'),
      fc.array(rawHeader, { maxLength: 5 }),
      fc.string({ unit: 'binary-ascii', maxLength: 40 }),
      fc.boolean(),
      async (route, method, headers, body, host) => {
        const url = route.url.replace(/:(\w+)/g, () => randomUUID());
        const raw = rawRequest(method, url, [...(host ? HOST : []), ...headers], body);
        const res = await sendRaw(h.app, raw, 3000);
        assert.equal(
          rawProblem(res),
          null,
          `${JSON.stringify(raw.slice(0, 300))} -> ${res.status} ${res.body.slice(0, 200)}`,
        );
      },
    ),
    { seed: SEED, numRuns: 300, interruptAfterTimeLimit: 10_000, markInterruptAsFailure: false },
  );
});

test('the server is healthy after the fuzzing', async () => {
  assert.deepEqual((await h.request('GET', '/health')).body, { message: 'ok' });
  const id = await create('After The Storm');
  const got = await h.request('GET', `${env}/services/${id}`, { token: t.token });
  assert.equal(got.status, 200, got.raw);
  const deploy = await h.request('POST', `${env}/services/${id}/deploy`, { token: t.token, body: {} });
  assert.equal(deploy.status, 200, deploy.raw);
  const raw = await sendRaw(h.app, rawRequest('GET', '/health', [['host', 'localhost']]), 3000);
  assert.equal(raw.status, 200);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

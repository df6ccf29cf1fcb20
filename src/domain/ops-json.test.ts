import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  HOSTED_EXAMPLE,
  HOSTED_EXAMPLE_DEPENDENCIES,
  HOSTED_EXAMPLES,
} from '../../test/helpers/ops-json-examples.ts';
import { DEFAULT_OPS_CONFIG, isCidr, OPS_LIMITS, opsDependencies, parseOpsJson } from './ops-json.ts';

const parse = (value: unknown) => parseOpsJson(JSON.stringify(value), 'ops_json');
const fields = (value: unknown) => parse(value).errors.map((e) => e.field);

describe('parseOpsJson: document shape', () => {
  test('an empty object gives the defaults of the Limits table and no errors', () => {
    const { config, errors } = parse({});
    assert.deepEqual(errors, []);
    assert.deepEqual(config, DEFAULT_OPS_CONFIG);
    assert.equal(config.ingress.request_body_size, 30);
    assert.equal(config.ingress.send_timeout, 120);
    assert.equal(config.ingress.read_timeout, 120);
    assert.equal(config.ingress.connection_timeout, 10);
    assert.equal(config.ingress.proxy_buffer_size, null);
    assert.equal(config.ingress.proxy_buffers, null);
    assert.equal(config.ingress.https_redirect, true);
    assert.equal(config.ingress.hsts_max_age, null);
    assert.equal(config.deploy_timeout, 5);
    assert.equal(config.health_check, null);
    assert.deepEqual(config.dependencies, []);
    assert.deepEqual(config.ip_whitelist, []);
  });

  test('the returned config is a copy: changing it does not change the defaults', () => {
    const { config } = parse({ ingress: {} });
    config.ingress.request_body_size = 999;
    config.dependencies.push({ ...bucket('x'), kind: 's3', type: 'buckets' });
    assert.equal(DEFAULT_OPS_CONFIG.ingress.request_body_size, 30);
    assert.deepEqual(DEFAULT_OPS_CONFIG.dependencies, []);
    assert.equal(parse({}).config.ingress.request_body_size, 30);
  });

  test('text that is not JSON is one error on the field itself', () => {
    const { config, errors } = parseOpsJson('{"deploy_timeout": ', 'ops_json');
    assert.deepEqual(errors, [{ field: 'ops_json', error: 'ops_json is not valid JSON' }]);
    assert.deepEqual(config, DEFAULT_OPS_CONFIG);
  });

  test('a JSON value that is not an object is refused', () => {
    for (const text of ['[]', '42', '"x"', 'null', 'true']) {
      const { errors } = parseOpsJson(text, 'ops_json');
      assert.deepEqual(errors, [{ field: 'ops_json', error: 'ops_json must be a JSON object' }], text);
    }
  });

  test('unknown keys are ignored rather than refused', () => {
    const { errors, config } = parse({
      volumes: [{ path: '/data' }],
      autoscaling: { max: 3 },
      deploy_timeout: 7,
    });
    assert.deepEqual(errors, []);
    assert.equal(config.deploy_timeout, 7);
  });

  test('error field paths start with the request field name given by the caller', () => {
    const { errors } = parseOpsJson(
      JSON.stringify({ ingress: { read_timeout: 0 }, deploy_timeout: 0 }),
      'services[1].ops_json',
    );
    assert.deepEqual(
      errors.map((e) => e.field),
      ['services[1].ops_json.ingress.read_timeout', 'services[1].ops_json.deploy_timeout'],
    );
    for (const e of errors) assert.ok(e.error.startsWith(e.field), e.error);
  });

  test('several errors are all reported, each with its own path', () => {
    assert.deepEqual(
      fields({
        dependencies: { s3: { buckets: [{ id: '' }] } },
        health_check: { type: 'http', path: 'nope', timeout: 0 },
        ingress: { request_body_size: 0, ip_whitelist: ['bad'] },
        deploy_timeout: 21,
      }),
      [
        'ops_json.dependencies.s3.buckets[0].id',
        'ops_json.health_check.timeout',
        'ops_json.health_check.path',
        'ops_json.ingress.request_body_size',
        'ops_json.ingress.ip_whitelist[0]',
        'ops_json.deploy_timeout',
      ],
    );
  });
});

/** Each numeric option: where it lives, its bounds, and a getter for the parsed value. */
const numericOptions: {
  name: string;
  doc: (v: unknown) => unknown;
  path: string;
  min: number;
  max: number;
  read: (c: ReturnType<typeof parse>['config']) => unknown;
}[] = [
  {
    name: 'health check timeout',
    doc: (v) => ({ health_check: { type: 'tcp', port: 80, timeout: v } }),
    path: 'ops_json.health_check.timeout',
    min: OPS_LIMITS.healthCheckTimeout.min,
    max: OPS_LIMITS.healthCheckTimeout.max,
    read: (c) => c.health_check?.timeout,
  },
  {
    name: 'request_body_size',
    doc: (v) => ({ ingress: { request_body_size: v } }),
    path: 'ops_json.ingress.request_body_size',
    min: 1,
    max: 1024,
    read: (c) => c.ingress.request_body_size,
  },
  {
    name: 'proxy_buffer_size',
    doc: (v) => ({ ingress: { proxy_buffer_size: v } }),
    path: 'ops_json.ingress.proxy_buffer_size',
    min: OPS_LIMITS.proxyBufferSizeKb.min,
    max: OPS_LIMITS.proxyBufferSizeKb.max,
    read: (c) => c.ingress.proxy_buffer_size,
  },
  {
    name: 'proxy_buffers',
    doc: (v) => ({ ingress: { proxy_buffers: v } }),
    path: 'ops_json.ingress.proxy_buffers',
    min: OPS_LIMITS.proxyBuffers.min,
    max: OPS_LIMITS.proxyBuffers.max,
    read: (c) => c.ingress.proxy_buffers,
  },
  {
    name: 'send_timeout',
    doc: (v) => ({ ingress: { send_timeout: v } }),
    path: 'ops_json.ingress.send_timeout',
    min: 1,
    max: 3600,
    read: (c) => c.ingress.send_timeout,
  },
  {
    name: 'read_timeout',
    doc: (v) => ({ ingress: { read_timeout: v } }),
    path: 'ops_json.ingress.read_timeout',
    min: 1,
    max: 3600,
    read: (c) => c.ingress.read_timeout,
  },
  {
    name: 'connection_timeout',
    doc: (v) => ({ ingress: { connection_timeout: v } }),
    path: 'ops_json.ingress.connection_timeout',
    min: 1,
    max: 3600,
    read: (c) => c.ingress.connection_timeout,
  },
  {
    name: 'deploy_timeout',
    doc: (v) => ({ deploy_timeout: v }),
    path: 'ops_json.deploy_timeout',
    min: 1,
    max: 20,
    read: (c) => c.deploy_timeout,
  },
];

describe('parseOpsJson: limits', () => {
  test('the exported limits match the Limits table of the spec', () => {
    assert.equal(OPS_LIMITS.healthCheckTimeout.default, 10);
    assert.deepEqual(OPS_LIMITS.requestBodySizeMb, { default: 30, min: 1, max: 1024 });
    assert.deepEqual(OPS_LIMITS.ingressTimeout, { default: 120, min: 1, max: 3600 });
    assert.deepEqual(OPS_LIMITS.connectionTimeout, { default: 10, min: 1, max: 3600 });
    assert.deepEqual(OPS_LIMITS.deployTimeoutMin, { default: 5, min: 1, max: 20 });
  });

  test('a health check without a timeout gets the default of 10 seconds', () => {
    const { config, errors } = parse({ health_check: { type: 'tcp', port: 5432 } });
    assert.deepEqual(errors, []);
    assert.equal(config.health_check?.timeout, 10);
  });

  test('an ingress block that sets one option keeps the defaults of the others', () => {
    const { config, errors } = parse({ ingress: { read_timeout: 600 } });
    assert.deepEqual(errors, []);
    assert.deepEqual(config.ingress, { ...DEFAULT_OPS_CONFIG.ingress, read_timeout: 600 });
  });

  for (const option of numericOptions) {
    test(`${option.name}: ${option.min} and ${option.max} are accepted`, () => {
      for (const value of [option.min, option.max]) {
        const { config, errors } = parse(option.doc(value));
        assert.deepEqual(errors, [], `${option.name}=${value}`);
        assert.equal(option.read(config), value);
      }
    });

    test(`${option.name}: ${option.min - 1} and ${option.max + 1} are refused with the bounds in the message`, () => {
      for (const value of [option.min - 1, option.max + 1]) {
        const { errors } = parse(option.doc(value));
        assert.equal(errors.length, 1, `${option.name}=${value}`);
        assert.equal(errors[0]?.field, option.path);
        assert.match(errors[0]?.error ?? '', new RegExp(`from ${option.min} to ${option.max}$`));
      }
    });

    test(`${option.name}: fractions, strings, null and booleans are refused`, () => {
      for (const value of [option.min + 0.5, String(option.min), null, true]) {
        const { errors } = parse(option.doc(value));
        assert.deepEqual(
          errors.map((e) => e.field),
          [option.path],
          `${option.name}=${JSON.stringify(value)}`,
        );
      }
    });
  }

  test('an out-of-range value falls back to the default in the returned config', () => {
    const { config, errors } = parse({ ingress: { request_body_size: 2048 }, deploy_timeout: 0 });
    assert.equal(errors.length, 2);
    assert.equal(config.ingress.request_body_size, 30);
    assert.equal(config.deploy_timeout, 5);
  });

  test('request_body_size is in whole MB: 1 GB is 1024', () => {
    assert.deepEqual(parse({ ingress: { request_body_size: 1024 } }).errors, []);
    assert.equal(parse({ ingress: { request_body_size: 1025 } }).errors.length, 1);
  });

  test('one hour is 3600 seconds for send, read and connection timeouts', () => {
    const { config, errors } = parse({
      ingress: { send_timeout: 3600, read_timeout: 3600, connection_timeout: 3600 },
    });
    assert.deepEqual(errors, []);
    assert.equal(config.ingress.send_timeout, 3600);
    assert.equal(config.ingress.read_timeout, 3600);
    assert.equal(config.ingress.connection_timeout, 3600);
  });
});

describe('parseOpsJson: HTTPS redirect and HSTS', () => {
  test('a service may opt out of the redirect and opt in to HSTS', () => {
    const { config, errors } = parse({ ingress: { https_redirect: false, hsts_max_age: 31_536_000 } });
    assert.deepEqual(errors, []);
    assert.deepEqual(config.ingress, {
      ...DEFAULT_OPS_CONFIG.ingress,
      https_redirect: false,
      hsts_max_age: 31_536_000,
    });
    assert.equal(parse({ ingress: { https_redirect: true } }).config.ingress.https_redirect, true);
  });

  test('hsts_max_age takes 0 (clears what browsers kept) to two years, or null for none', () => {
    for (const value of [0, 63_072_000, null]) {
      const { config, errors } = parse({ ingress: { hsts_max_age: value } });
      assert.deepEqual(errors, [], String(value));
      assert.equal(config.ingress.hsts_max_age, value);
    }
  });

  test('hsts_max_age out of range or not a whole number is refused naming the field and the bounds', () => {
    for (const value of [-1, 63_072_001, 1.5, '31536000', true]) {
      const { config, errors } = parse({ ingress: { hsts_max_age: value } });
      assert.deepEqual(
        errors.map((e) => e.field),
        ['ops_json.ingress.hsts_max_age'],
        JSON.stringify(value),
      );
      assert.equal(
        errors[0]?.error,
        'ops_json.ingress.hsts_max_age must be a whole number of seconds from 0 to 63072000',
      );
      assert.equal(config.ingress.hsts_max_age, null);
    }
  });

  test('https_redirect other than true or false is refused naming the field', () => {
    for (const value of ['false', 0, null, {}]) {
      const { config, errors } = parse({ ingress: { https_redirect: value } });
      assert.deepEqual(errors, [
        {
          field: 'ops_json.ingress.https_redirect',
          error: 'ops_json.ingress.https_redirect must be true or false',
        },
      ]);
      assert.equal(config.ingress.https_redirect, true, JSON.stringify(value));
    }
  });
});

describe('parseOpsJson: health_check', () => {
  test('the four check types are accepted', () => {
    const checks = [
      { type: 'http', path: '/healthz', port: 8080 },
      { type: 'tcp', port: 5432 },
      { type: 'shell', command: 'pg_isready' },
      { type: 'grpc', port: 50051 },
    ];
    for (const check of checks) {
      const { config, errors } = parse({ health_check: { ...check, timeout: 3 } });
      assert.deepEqual(errors, [], check.type);
      assert.deepEqual(config.health_check, { ...check, timeout: 3 });
    }
  });

  test('an unknown type or a non-object is refused on the health_check path', () => {
    for (const hc of [{ type: 'udp' }, {}, 'http', [{ type: 'http' }], null]) {
      assert.deepEqual(fields({ health_check: hc }), ['ops_json.health_check'], JSON.stringify(hc));
    }
  });

  test('an http check needs a path starting with / of at most 200 characters', () => {
    assert.deepEqual(fields({ health_check: { type: 'http' } }), ['ops_json.health_check.path']);
    assert.deepEqual(fields({ health_check: { type: 'http', path: 'healthz' } }), [
      'ops_json.health_check.path',
    ]);
    assert.deepEqual(fields({ health_check: { type: 'http', path: `/${'a'.repeat(199)}` } }), []);
    assert.deepEqual(fields({ health_check: { type: 'http', path: `/${'a'.repeat(200)}` } }), [
      'ops_json.health_check.path',
    ]);
  });

  test('a shell check needs a non-blank command', () => {
    assert.deepEqual(fields({ health_check: { type: 'shell' } }), ['ops_json.health_check.command']);
    assert.deepEqual(fields({ health_check: { type: 'shell', command: '   ' } }), [
      'ops_json.health_check.command',
    ]);
  });

  test('the port of a check is 1 to 65535', () => {
    assert.deepEqual(fields({ health_check: { type: 'tcp', port: 1 } }), []);
    assert.deepEqual(fields({ health_check: { type: 'tcp', port: 65535 } }), []);
    assert.deepEqual(fields({ health_check: { type: 'tcp', port: 0 } }), ['ops_json.health_check.port']);
    assert.deepEqual(fields({ health_check: { type: 'tcp', port: 65536 } }), ['ops_json.health_check.port']);
  });
});

const bucket = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  prefix: id,
  exports: {},
  skip_preview: false,
  preview_only: false,
  properties: {},
  ...extra,
});
const deps = (dependencies: unknown) => parse({ dependencies });
const depFields = (dependencies: unknown) => fields({ dependencies });

describe('parseOpsJson: dependencies (the hosted format)', () => {
  for (const { what, document } of HOSTED_EXAMPLES) {
    test(`issue 11's example is accepted as written: ${what}`, () => {
      assert.deepEqual(parse(document).errors, []);
    });
  }

  test('the example reads as one resource per declared item, with kind, type, prefix and properties', () => {
    const { config } = parse(HOSTED_EXAMPLE);
    assert.deepEqual(
      config.dependencies.map((d) => `${d.kind}.${d.type}:${d.id}:${d.prefix}`),
      [
        's3.buckets:attachments:attachments',
        'sns.topics:...:...',
        'sqs.queues:...:...',
        'rds.instances:main-db:userdata',
        'elasticache.clusters:cache:sessions',
      ],
    );
    const rds = config.dependencies.find((d) => d.kind === 'rds');
    assert.deepEqual(rds?.properties, {
      engine: 'postgres',
      version: '17.5',
      storage_gb: 10,
      instance_type: 'db.t4g.small',
      publicly_accessible: false,
    });
    assert.deepEqual(opsDependencies(config), HOSTED_EXAMPLE_DEPENDENCIES);
    assert.deepEqual(config.cron_jobs, [{ schedule: '*/2 * * * *', path: '/api/v1/sync' }]);
  });

  test('prefix defaults to the id; engines default to postgres and redis; flags default to false', () => {
    const { config, errors } = deps({
      rds: { instances: [{ id: 'db' }] },
      elasticache: { clusters: [{ id: 'c' }] },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(
      config.dependencies.map((d) => [d.prefix, d.properties.engine, d.skip_preview, d.preview_only]),
      [
        ['db', 'postgres', false, false],
        ['c', 'redis', false, false],
      ],
    );
  });

  test('unknown kinds and resource types are kept and reported, never refused', () => {
    const { config, errors } = deps({
      'gcp:cloudsql': {
        instances: [{ id: 'main', tier: 'db-f1-micro', exports: { DB: '$connectionName' } }],
      },
      s3: { access_points: [{ id: 'ap' }] },
      'some-future-kind': { things: [{ id: 'x' }] },
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(
      config.dependencies.map((d) => `${d.kind}.${d.type}:${d.id}`),
      ['gcp:cloudsql.instances:main', 's3.access_points:ap', 'some-future-kind.things:x'],
    );
    assert.deepEqual(config.dependencies[0]?.properties, { tier: 'db-f1-micro' });
    assert.deepEqual(opsDependencies(config), [
      { id: 'main', kind: 'gcp:cloudsql', exports: { DB: '$connectionName' } },
      { id: 'ap', kind: 's3', exports: {} },
      { id: 'x', kind: 'some-future-kind', exports: {} },
    ]);
  });

  test('the old array form is refused with a message that shows the hosted form', () => {
    const { errors } = deps([{ id: 'db', kind: 'rds', exports: { DB: '$db.url' } }]);
    assert.deepEqual(
      errors.map((e) => e.field),
      ['ops_json.dependencies'],
    );
    assert.match(errors[0]?.error ?? '', /object of kinds/);
    assert.match(errors[0]?.error ?? '', /"s3": \{"buckets"/);
    assert.match(errors[0]?.error ?? '', /array form .* no longer read/);
  });

  test('a kind must list its resources by type, and a type must be an array', () => {
    assert.deepEqual(depFields({ s3: [] }), ['ops_json.dependencies.s3']);
    assert.match(deps({ s3: 'x' }).errors[0]?.error ?? '', /\{"buckets": \[\.\.\.\]\}/);
    assert.deepEqual(depFields({ s3: { buckets: {} } }), ['ops_json.dependencies.s3.buckets']);
    assert.deepEqual(depFields({ s3: { buckets: ['x'] } }), ['ops_json.dependencies.s3.buckets[0]']);
  });

  test('ids are non-empty, at most 100 characters, and unique among the resources of one type', () => {
    assert.deepEqual(depFields({ s3: { buckets: [{}] } }), ['ops_json.dependencies.s3.buckets[0].id']);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: '  ' }] } }), [
      'ops_json.dependencies.s3.buckets[0].id',
    ]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a'.repeat(101) }] } }), [
      'ops_json.dependencies.s3.buckets[0].id',
    ]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a'.repeat(100) }] } }), []);
    const { config, errors } = deps({
      s3: { buckets: [{ id: 'x' }, { id: 'y' }, { id: 'x' }] },
      sqs: { queues: [{ id: 'x' }] },
    });
    assert.deepEqual(
      errors.map((e) => e.field),
      ['ops_json.dependencies.s3.buckets[2].id'],
    );
    assert.match(errors[0]?.error ?? '', /repeats the id x/);
    assert.deepEqual(
      config.dependencies.map((d) => `${d.kind}:${d.id}`),
      ['s3:x', 's3:y', 'sqs:x'],
    );
  });

  test('prefix, skip_preview and preview_only are checked; both flags at once is refused', () => {
    const at = 'ops_json.dependencies.s3.buckets[0]';
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', prefix: '' }] } }), [`${at}.prefix`]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', prefix: 7 }] } }), [`${at}.prefix`]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', skip_preview: 'yes' }] } }), [
      `${at}.skip_preview`,
    ]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', skip_preview: true, preview_only: true }] } }), [
      `${at}.preview_only`,
    ]);
    const { config } = deps({
      s3: {
        buckets: [
          { id: 'a', skip_preview: true },
          { id: 'b', preview_only: true },
        ],
      },
    });
    assert.deepEqual(
      config.dependencies.map((d) => [d.id, d.skip_preview, d.preview_only]),
      [
        ['a', true, false],
        ['b', false, true],
      ],
    );
  });

  test("a known kind's exports name one of its attributes; other kinds any $ token", () => {
    const at = 'ops_json.dependencies';
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', exports: { B: '$port' } }] } }), [
      `${at}.s3.buckets[0].exports.B`,
    ]);
    assert.match(
      deps({ s3: { buckets: [{ id: 'a', exports: { B: '$port' } }] } }).errors[0]?.error ?? '',
      /one of \$name, \$arn, \$endpoint, \$username, \$password/,
    );
    assert.deepEqual(depFields({ rds: { instances: [{ id: 'a', exports: { P: '$password' } }] } }), []);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', exports: ['$name'] }] } }), [
      `${at}.s3.buckets[0].exports`,
    ]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', exports: { B: 'name' } }] } }), [
      `${at}.s3.buckets[0].exports.B`,
    ]);
    assert.deepEqual(depFields({ s3: { buckets: [{ id: 'a', exports: { 'MY-VAR': '$name' } }] } }), [
      `${at}.s3.buckets[0].exports.MY-VAR`,
    ]);
    assert.deepEqual(
      depFields({ 'gcp:pubsub': { topics: [{ id: 'a', exports: { T: '$whatever.x' } }] } }),
      [],
    );
  });

  test('the checked properties of rds and elasticache must have their types', () => {
    const at = 'ops_json.dependencies';
    assert.deepEqual(
      depFields({
        rds: { instances: [{ id: 'a', storage_gb: 0, publicly_accessible: 'no', engine: '' }] },
        elasticache: { clusters: [{ id: 'c', num_nodes: 1.5 }] },
      }),
      [
        `${at}.rds.instances[0].engine`,
        `${at}.rds.instances[0].storage_gb`,
        `${at}.rds.instances[0].publicly_accessible`,
        `${at}.elasticache.clusters[0].num_nodes`,
      ],
    );
  });

  test('every error message starts with its field path', () => {
    const { errors } = deps({ s3: { buckets: [{ id: '', prefix: 1, exports: { X: 'y' } }] }, sqs: 3 });
    assert.equal(errors.length, 4);
    for (const e of errors) assert.ok(e.error.startsWith(e.field), e.error);
  });
});

describe('parseOpsJson: cron.cron_jobs', () => {
  const web = (cron: unknown, type = 'web') => parseOpsJson(JSON.stringify({ cron }), 'ops_json', type);

  test('jobs of web and internal services are read in order', () => {
    for (const type of ['web', 'internal']) {
      const { config, errors } = web(
        {
          cron_jobs: [
            { schedule: '*/2 * * * *', path: '/a' },
            { schedule: '0 3 * * *', path: '/b?x=1' },
          ],
        },
        type,
      );
      assert.deepEqual(errors, []);
      assert.deepEqual(config.cron_jobs, [
        { schedule: '*/2 * * * *', path: '/a' },
        { schedule: '0 3 * * *', path: '/b?x=1' },
      ]);
    }
  });

  test('other service types get a field error naming their type', () => {
    for (const type of ['worker', 'cron', 'job']) {
      const { errors } = web({ cron_jobs: [{ schedule: '* * * * *', path: '/a' }] }, type);
      assert.deepEqual(
        errors.map((e) => e.field),
        ['ops_json.cron.cron_jobs'],
      );
      assert.match(errors[0]?.error ?? '', new RegExp(`only web and internal .*${type}`));
    }
    assert.deepEqual(web({ cron_jobs: [] }, 'worker').errors, []);
  });

  test('schedule must be a cron expression and path must start with /', () => {
    assert.deepEqual(
      web({ cron_jobs: [{ schedule: 'often', path: 'a' }, { path: '/b' }, 'x'] }).errors.map((e) => e.field),
      [
        'ops_json.cron.cron_jobs[0].schedule',
        'ops_json.cron.cron_jobs[0].path',
        'ops_json.cron.cron_jobs[1].schedule',
        'ops_json.cron.cron_jobs[2]',
      ],
    );
    assert.deepEqual(
      web([]).errors.map((e) => e.field),
      ['ops_json.cron'],
    );
    assert.deepEqual(
      web({ cron_jobs: {} }).errors.map((e) => e.field),
      ['ops_json.cron.cron_jobs'],
    );
  });
});

describe('parseOpsJson: ip_whitelist', () => {
  test('IPv4 and IPv6 addresses and CIDRs are accepted and returned in order', () => {
    const list = [
      '203.0.113.0/24',
      '10.0.0.1',
      '0.0.0.0/0',
      '192.168.1.1/32',
      '2001:db8::/32',
      '::1',
      '::/0',
    ];
    const { config, errors } = parse({ ingress: { ip_whitelist: list } });
    assert.deepEqual(errors, []);
    assert.deepEqual(config.ip_whitelist, list);
  });

  test('bad IPv4 entries are refused with their index in the path', () => {
    const bad = [
      '256.0.0.1',
      '10.0.0.0/33',
      '10.0.0',
      '10.0.0.0/',
      '10.0.0.0/-1',
      'example.com',
      '',
      ' 10.0.0.1',
    ];
    const { errors } = parse({ ingress: { ip_whitelist: ['10.0.0.0/8', ...bad] } });
    assert.deepEqual(
      errors.map((e) => e.field),
      bad.map((_, i) => `ops_json.ingress.ip_whitelist[${i + 1}]`),
    );
    assert.match(errors[0]?.error ?? '', /must be a CIDR such as 203\.0\.113\.0\/24$/);
  });

  test('non-string entries are refused', () => {
    assert.deepEqual(fields({ ingress: { ip_whitelist: [42, null] } }), [
      'ops_json.ingress.ip_whitelist[0]',
      'ops_json.ingress.ip_whitelist[1]',
    ]);
  });

  test('the list is an array of at most 100 CIDRs', () => {
    const cidrs = (n: number) => Array.from({ length: n }, (_, i) => `10.0.${i}.0/24`);
    assert.deepEqual(fields({ ingress: { ip_whitelist: cidrs(100) } }), []);
    assert.deepEqual(fields({ ingress: { ip_whitelist: cidrs(101) } }), ['ops_json.ingress.ip_whitelist']);
    assert.deepEqual(fields({ ingress: { ip_whitelist: '10.0.0.0/8' } }), ['ops_json.ingress.ip_whitelist']);
  });

  test('an IPv6 prefix above 128 is refused', () => {
    assert.equal(isCidr('2001:db8::/128'), true);
    assert.equal(isCidr('2001:db8::/129'), false);
    assert.equal(isCidr('gggg::/64'), false);
  });

  test('malformed IPv6 addresses are refused', () => {
    // Strings made only of hex digits and colons are not all IPv6 addresses.
    for (const bad of [':', ':::', '1:2', '1:2:3:4:5:6:7:8:9', '1::2::3', '12345::1', 'abc:/64']) {
      assert.equal(isCidr(bad), false, bad);
    }
  });

  test('an ingress that is not an object is refused', () => {
    assert.deepEqual(fields({ ingress: [] }), ['ops_json.ingress']);
    assert.deepEqual(fields({ ingress: 'fast' }), ['ops_json.ingress']);
  });
});

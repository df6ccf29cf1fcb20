import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { OPS_LIMITS } from '../../src/domain/ops-json.ts';
import { setEnvironmentState } from '../../src/store/repositories/environments.ts';
import { type Harness, type Reply, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Create Service (POST /v1/environments/{envId}/services): every rule of the spec's table and numbered
 * rules, sent over HTTP one bad input at a time, starting from a valid body per source.
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness({ rateLimitPerMin: 5000 });
  t = await h.tenant();
});
after(() => h.close());

type Body = Record<string, unknown>;
interface FieldError {
  field: string;
  error: string;
}

const ZERO_UUID = '00000000-0000-0000-0000-000000000000';
const docker = (over: Body = {}): Body => ({ ...VALID_SERVICE.docker, ...over });
const github = (over: Body = {}): Body => ({ ...VALID_SERVICE.github, ...over });
const gitlab = (over: Body = {}): Body => ({ ...VALID_SERVICE.gitlab, ...over });
const helm = (over: Body = {}): Body => ({ ...VALID_SERVICE.helm, ...over });
const without = (body: Body, ...keys: string[]): Body =>
  Object.fromEntries(Object.entries(body).filter(([key]) => !keys.includes(key)));
const ops = (config: unknown) => docker({ ops_json: JSON.stringify(config) });

function create(body: unknown, tenant: Tenant = t): Promise<Reply> {
  return h.request('POST', `/v1/environments/${tenant.envId}/services`, { token: tenant.token, body });
}

/** 422 `validation` / `Invalid data` with exactly these fields (in any order), each error naming its field. */
function assertFieldErrors(res: Reply, fields: string[]): FieldError[] {
  assert.equal(res.status, 422, JSON.stringify(res.body));
  assert.equal(res.body.error_code, 'validation');
  assert.equal(res.body.message, 'Invalid data');
  assert.ok(Array.isArray(res.body.errors), 'errors is an array');
  const errors = res.body.errors as FieldError[];
  assert.deepEqual(errors.map((e) => e.field).sort(), [...fields].sort());
  for (const e of errors) {
    assert.equal(typeof e.error, 'string');
    assert.ok(e.error.includes(e.field), `the error text "${e.error}" names the field ${e.field}`);
  }
  return errors;
}

async function serviceAudits(tenant: Tenant) {
  const res = await h.request('GET', '/v1/audit-logs?limit=100', { token: tenant.token });
  assert.equal(res.status, 200);
  return (res.body.data.audit_logs as { action: string; resource_id: string }[]).filter((a) =>
    a.action.startsWith('service.'),
  );
}

interface Case {
  what: string;
  body: Body;
  field: string;
  /** The exact error text, or a pattern it must match. */
  error?: string | RegExp;
}

function runCases(cases: Case[]) {
  for (const c of cases) {
    test(c.what, async () => {
      const res = await create(c.body);
      const [error] = assertFieldErrors(res, [c.field]);
      if (typeof c.error === 'string') assert.equal(error?.error, c.error);
      else if (c.error) assert.match(error?.error ?? '', c.error);
    });
  }
}

describe('name', () => {
  runCases([
    { what: 'missing', body: without(docker(), 'name'), field: 'name', error: 'name is a required field' },
    { what: 'not a string', body: docker({ name: 42 }), field: 'name', error: 'name must be a string' },
    { what: 'too short (2 characters)', body: docker({ name: 'Ab' }), field: 'name', error: /at least 3/ },
    { what: 'blank after trimming', body: docker({ name: '     ' }), field: 'name', error: /at least 3/ },
    {
      what: 'too long (51 characters)',
      body: docker({ name: 'A'.repeat(51) }),
      field: 'name',
      error: /at most 50/,
    },
    { what: 'digits', body: docker({ name: 'App 2' }), field: 'name', error: /letters and spaces/ },
    { what: 'a hyphen', body: docker({ name: 'My-App' }), field: 'name', error: /letters and spaces/ },
    { what: 'an underscore', body: docker({ name: 'My_App' }), field: 'name', error: /letters and spaces/ },
    {
      // Letters to a person, so the message says which letters: the subdomain is made of them.
      what: 'an accented letter',
      body: docker({ name: 'Café' }),
      field: 'name',
      error:
        'name may contain only letters and spaces (A to Z, upper or lower case: no accented letters, digits, hyphens or underscores)',
    },
  ]);

  test('3 and 50 letters, with spaces, are accepted', async () => {
    for (const name of ['Abc', 'A'.repeat(50), 'My Web App']) {
      const res = await create(docker({ name }));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.service.name, name);
    }
  });
});

describe('source and type', () => {
  runCases([
    {
      what: 'source missing',
      body: without(docker(), 'source'),
      field: 'source',
      error: 'source is a required field',
    },
    {
      what: 'source unknown',
      body: docker({ source: 'bitbucket' }),
      field: 'source',
      error: /must be one of/,
    },
    { what: 'type unknown', body: docker({ type: 'daemon' }), field: 'type', error: /must be one of/ },
    { what: 'type not a string', body: docker({ type: 5 }), field: 'type' },
  ]);

  test('type is optional', async () => {
    const res = await create(without(docker(), 'type', 'port'));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.type, null);
  });
});

describe('port', () => {
  runCases([
    {
      what: 'required for type web',
      body: without(docker({ type: 'web' }), 'port'),
      field: 'port',
      error: 'port is a required field',
    },
    {
      what: 'required for type internal',
      body: without(docker({ type: 'internal' }), 'port'),
      field: 'port',
      error: 'port is a required field',
    },
    {
      what: 'null for type web',
      body: docker({ port: null }),
      field: 'port',
      error: 'port is a required field',
    },
    { what: '0', body: docker({ port: 0 }), field: 'port', error: 'port must be at least 1' },
    { what: '65536', body: docker({ port: 65536 }), field: 'port', error: 'port must be at most 65535' },
    { what: 'not an integer', body: docker({ port: 80.5 }), field: 'port', error: 'port must be an integer' },
    { what: 'a string', body: docker({ port: '8080' }), field: 'port', error: 'port must be an integer' },
  ]);

  test('not required for worker, cron and job; 1 and 65535 accepted', async () => {
    for (const body of [
      without(docker({ type: 'worker' }), 'port'),
      without(docker({ type: 'job' }), 'port'),
      without(docker({ type: 'cron', cron_schedule: '0 * * * *' }), 'port'),
      docker({ port: 1 }),
      docker({ port: 65535 }),
    ]) {
      const res = await create(body);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.service.port, body.port ?? null);
    }
  });
});

describe('cron_schedule', () => {
  runCases([
    {
      what: 'required for type cron',
      body: docker({ type: 'cron' }),
      field: 'cron_schedule',
      error: 'cron_schedule is a required field',
    },
    {
      what: 'over 100 characters',
      body: docker({ type: 'cron', cron_schedule: `0 * * * *${' '.repeat(92)}` }),
      field: 'cron_schedule',
      error: 'cron_schedule must be at most 100 characters',
    },
    {
      what: 'not a cron expression',
      body: docker({ type: 'cron', cron_schedule: 'every day at noon' }),
      field: 'cron_schedule',
      error: /cron expression/,
    },
  ]);

  test('a cron expression is accepted and echoed', async () => {
    const res = await create(docker({ type: 'cron', cron_schedule: '*/5 * * * *' }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.cron_schedule, '*/5 * * * *');
  });
});

describe('resources', () => {
  for (const [source, body] of [
    ['docker_image', docker()],
    ['github', github()],
    ['gitlab', gitlab()],
  ] as const) {
    runCases(
      (['replica_count', 'cpu_count_min', 'memory_mb_min'] as const).map((field) => ({
        what: `${field} required for ${source}`,
        body: without(body, field),
        field,
        error: `${field} is a required field`,
      })),
    );
  }

  runCases([
    {
      what: 'replica_count -1',
      body: docker({ replica_count: -1 }),
      field: 'replica_count',
      error: 'replica_count must be at least 0',
    },
    {
      what: 'replica_count not an integer',
      body: docker({ replica_count: 1.5 }),
      field: 'replica_count',
      error: 'replica_count must be an integer',
    },
    {
      what: 'replica_count a string',
      body: docker({ replica_count: '2' }),
      field: 'replica_count',
      error: 'replica_count must be an integer',
    },
    {
      what: 'cpu_count_min a string',
      body: docker({ cpu_count_min: '1' }),
      field: 'cpu_count_min',
      error: 'cpu_count_min must be a number',
    },
    {
      what: 'memory_mb_min not an integer',
      body: docker({ memory_mb_min: 256.5 }),
      field: 'memory_mb_min',
      error: 'memory_mb_min must be an integer',
    },
    {
      // 1e-10 CPUs is 0 nanocpus to Docker: no limit at all.
      what: 'cpu_count_max a runtime cannot honour (1e-10)',
      body: docker({ cpu_count_max: 1e-10 }),
      field: 'cpu_count_max',
      error: 'cpu_count_max must be at least 0.01',
    },
    {
      what: 'cpu_count_min below a hundredth of a CPU',
      body: docker({ cpu_count_min: 0.001 }),
      field: 'cpu_count_min',
      error: 'cpu_count_min must be at least 0.01',
    },
    {
      what: 'cpu_count_max below cpu_count_min',
      body: docker({ cpu_count_min: 1, cpu_count_max: 0.5 }),
      field: 'cpu_count_max',
      error: /cpu_count_min/,
    },
    {
      what: 'memory_mb_max below memory_mb_min',
      body: docker({ memory_mb_min: 512, memory_mb_max: 256 }),
      field: 'memory_mb_max',
      error: /memory_mb_min/,
    },
  ]);

  test('replica_count 0 and max equal to min are accepted', async () => {
    const res = await create(
      docker({
        replica_count: 0,
        cpu_count_min: 1,
        cpu_count_max: 1,
        memory_mb_min: 512,
        memory_mb_max: 512,
      }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const s = res.body.data.service;
    assert.equal(s.replica_count, 0);
    assert.equal(s.cpu_count_max, 1);
    assert.equal(s.memory_mb_max, 512);
  });

  test('helm_chart needs neither replica_count, cpu_count_min nor memory_mb_min', async () => {
    const res = await create(helm());
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const s = res.body.data.service;
    assert.equal(s.replica_count, null);
    assert.equal('cpu_count_min' in s, false);
    assert.equal('memory_mb_min' in s, false);
  });
});

describe('ids', () => {
  runCases([
    {
      what: 'prov_node_group_id not a UUID',
      body: docker({ prov_node_group_id: 'ng-1' }),
      field: 'prov_node_group_id',
      error: 'prov_node_group_id must be a UUID',
    },
    {
      what: 'installation_id not a UUID',
      body: github({ installation_id: '12345' }),
      field: 'installation_id',
      error: 'installation_id must be a UUID',
    },
    {
      what: 'installation_id with a docker_image source',
      body: docker({ installation_id: randomUUID() }),
      field: 'installation_id',
    },
  ]);

  test('UUIDs are accepted; a gitlab installation_id is the GitLab connection', async () => {
    const group = randomUUID();
    const conn = await h.gitConnection(t, 'gitlab');
    const res = await create(gitlab({ prov_node_group_id: group, installation_id: conn }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.prov_node_group_id, group);
    assert.equal(res.body.data.service.gitlab_connection_id, conn);
  });
});

describe('git sources', () => {
  for (const [source, body] of [
    ['github', github()],
    ['gitlab', gitlab()],
  ] as const) {
    runCases([
      {
        what: `git_repo_full_name required for ${source}`,
        body: without(body, 'git_repo_full_name'),
        field: 'git_repo_full_name',
        error: 'git_repo_full_name is a required field',
      },
      {
        what: `git_repo_branch required for ${source}`,
        body: without(body, 'git_repo_branch'),
        field: 'git_repo_branch',
        error: 'git_repo_branch is a required field',
      },
    ]);
  }

  runCases(
    ['acme', 'acme/', '/app', 'acme app/web', 'acme\\app'].map((name) => ({
      what: `git_repo_full_name "${name}" is not org/repo`,
      body: github({ git_repo_full_name: name }),
      field: 'git_repo_full_name',
      error: /org\/repo/,
    })),
  );

  runCases([
    {
      what: 'git_repo_full_name with a docker_image source',
      body: docker({ git_repo_full_name: 'acme/app' }),
      field: 'git_repo_full_name',
    },
    {
      what: 'git_repo_branch with a helm_chart source',
      body: helm({ git_repo_branch: 'main' }),
      field: 'git_repo_branch',
    },
    {
      what: 'auto_deploy with a docker_image source',
      body: docker({ auto_deploy: true }),
      field: 'auto_deploy',
      error: /github and gitlab/,
    },
    {
      what: 'auto_deploy true with type job',
      body: github({ type: 'job', auto_deploy: true }),
      field: 'auto_deploy',
      error: /job/,
    },
    {
      what: 'auto_deploy not a boolean',
      body: github({ auto_deploy: 'true' }),
      field: 'auto_deploy',
      error: 'auto_deploy must be a boolean',
    },
    {
      what: 'dockerfile_path with docker_image',
      body: docker({ dockerfile_path: 'Dockerfile' }),
      field: 'dockerfile_path',
    },
    {
      what: 'dockerfile_path with helm_chart',
      body: helm({ dockerfile_path: 'Dockerfile' }),
      field: 'dockerfile_path',
    },
    {
      what: 'ops_json_path with docker_image',
      body: docker({ ops_json_path: 'ops.json' }),
      field: 'ops_json_path',
    },
    {
      what: 'ops_json_path with helm_chart',
      body: helm({ ops_json_path: 'ops.json' }),
      field: 'ops_json_path',
    },
    {
      what: 'build_context with docker_image',
      body: docker({ build_context: 'app' }),
      field: 'build_context',
    },
    { what: 'build_context with helm_chart', body: helm({ build_context: 'app' }), field: 'build_context' },
    {
      what: 'build_context over 100 characters',
      body: github({ build_context: 'a'.repeat(101) }),
      field: 'build_context',
      error: 'build_context must be at most 100 characters',
    },
    { what: 'run_command with helm_chart', body: helm({ run_command: 'npm start' }), field: 'run_command' },
    {
      what: 'enable_previews with gitlab',
      body: gitlab({ enable_previews: true }),
      field: 'enable_previews',
      error: /github/,
    },
    {
      what: 'enable_previews with docker_image',
      body: docker({ enable_previews: true }),
      field: 'enable_previews',
    },
    {
      what: 'enable_previews with type worker',
      body: github({ type: 'worker', enable_previews: true }),
      field: 'enable_previews',
      error: /web/,
    },
    {
      what: 'enable_code_review with docker_image',
      body: docker({ enable_code_review: true }),
      field: 'enable_code_review',
      error: /github/,
    },
    {
      what: 'enable_code_review with gitlab',
      body: gitlab({ enable_code_review: true }),
      field: 'enable_code_review',
    },
  ]);

  test('a github service with every git option is accepted and echoes them', async () => {
    const installation = await h.gitConnection(t, 'github');
    const res = await create(
      github({
        installation_id: installation,
        auto_deploy: true,
        dockerfile_path: 'docker/Dockerfile',
        build_context: 'services/api',
        run_command: 'npm start',
        ops_json_path: 'deploy/ops.json',
        enable_previews: true,
        enable_code_review: true,
        git_repo_full_name: 'acme/group/app',
      }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const s = res.body.data.service;
    assert.equal(s.source, 'github');
    assert.equal(s.git_repo_full_name, 'acme/group/app');
    assert.equal(s.git_repo_branch, 'main');
    assert.equal(s.auto_deploy, true);
    assert.equal(s.dockerfile_path, 'docker/Dockerfile');
    assert.equal(s.build_context, 'services/api');
    assert.equal(s.run_command, 'npm start');
    assert.equal(s.ops_json_path, 'deploy/ops.json');
    assert.equal(s.enable_previews, true);
    assert.equal(s.enable_code_review, true);
    assert.equal('gitlab_connection_id' in s, false, 'a github installation is not a GitLab connection');
    for (const field of ['docker_image', 'docker_registry', 'helm_chart_repo', 'helm_chart_name', 'ops_json'])
      assert.equal(field in s, false, `${field} omitted`);
  });

  test('auto_deploy false is accepted with type job', async () => {
    const res = await create(github({ type: 'job', auto_deploy: false }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.type, 'job');
  });

  test('build_context: blank is treated as unset (omitted), whitespace is trimmed', async () => {
    for (const blank of ['', '   ', '\t ']) {
      const res = await create(github({ build_context: blank }));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal('build_context' in res.body.data.service, false, `"${blank}" is unset`);
    }
    const trimmed = await create(github({ build_context: '  services/api  ' }));
    assert.equal(trimmed.status, 200);
    assert.equal(trimmed.body.data.service.build_context, 'services/api');
    // Blank is unset, so it is no source violation on a non-git source either.
    const onDocker = await create(docker({ build_context: '  ' }));
    assert.equal(onDocker.status, 200, JSON.stringify(onDocker.body));
    assert.equal('build_context' in onDocker.body.data.service, false);
  });

  test('dockerfile_path and ops_json_path are trimmed server side', async () => {
    const res = await create(
      github({ dockerfile_path: '  docker/Dockerfile \n', ops_json_path: '\tdeploy/ops.json  ' }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.dockerfile_path, 'docker/Dockerfile');
    assert.equal(res.body.data.service.ops_json_path, 'deploy/ops.json');
    const got = await h.request('GET', `/v1/environments/${t.envId}/services/${res.body.data.service.id}`, {
      token: t.token,
    });
    assert.equal(got.body.data.service.dockerfile_path, 'docker/Dockerfile', 'stored trimmed');
  });
});

describe('docker_image and helm_chart sources', () => {
  runCases([
    {
      what: 'docker_image required for docker_image',
      body: without(docker(), 'docker_image'),
      field: 'docker_image',
      error: 'docker_image is a required field',
    },
    {
      what: 'docker_image with a tag (the deploy names the tag)',
      body: docker({ docker_image: 'acme/web:1.0' }),
      field: 'docker_image',
    },
    {
      what: 'docker_image with a github source',
      body: github({ docker_image: 'acme/web' }),
      field: 'docker_image',
    },
    {
      what: 'docker_registry with github',
      body: github({ docker_registry: 'registry.example.com' }),
      field: 'docker_registry',
      error: /docker_image/,
    },
    {
      what: 'docker_registry that is a URL, not a host',
      body: docker({ docker_registry: 'https://registry.example.com' }),
      field: 'docker_registry',
    },
    {
      what: 'helm_chart_repo required for helm_chart',
      body: without(helm(), 'helm_chart_repo'),
      field: 'helm_chart_repo',
      error: 'helm_chart_repo is a required field',
    },
    {
      what: 'helm_chart_name required for helm_chart',
      body: without(helm(), 'helm_chart_name'),
      field: 'helm_chart_name',
      error: 'helm_chart_name is a required field',
    },
    {
      what: 'helm_chart_name with a docker_image source',
      body: docker({ helm_chart_name: 'app' }),
      field: 'helm_chart_name',
    },
  ]);

  test('run_command is allowed for docker_image and git sources', async () => {
    for (const body of [docker({ run_command: './serve' }), gitlab({ run_command: './serve' })]) {
      const res = await create(body);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.data.service.run_command, './serve');
    }
  });

  test('a docker_image service with a registry, and a helm_chart service with values, are accepted', async () => {
    const d = await create(docker({ docker_registry: 'registry.example.com:5000', run_command: 'serve' }));
    assert.equal(d.status, 200, JSON.stringify(d.body));
    assert.equal(d.body.data.service.docker_registry, 'registry.example.com:5000');
    const values = 'replicaCount: 2\nimage:\n  tag: stable\n';
    const c = await create(helm({ helm_values_yml: values }));
    assert.equal(c.status, 200, JSON.stringify(c.body));
    assert.equal(c.body.data.service.helm_chart_repo, 'https://charts.example.com');
    assert.equal(c.body.data.service.helm_chart_name, 'app');
    assert.equal(c.body.data.service.helm_values_yml, values);
  });
});

describe('string lengths (contract: names and paths at most 100 characters)', () => {
  const long = 'a'.repeat(101);
  runCases(
    (
      [
        ['git_repo_branch', github({ git_repo_branch: long })],
        ['run_command', docker({ run_command: long })],
        ['dockerfile_path', github({ dockerfile_path: long })],
        ['ops_json_path', github({ ops_json_path: long })],
        ['docker_registry', docker({ docker_registry: long })],
        ['docker_image', docker({ docker_image: long })],
        ['helm_chart_repo', helm({ helm_chart_repo: long })],
        ['helm_chart_name', helm({ helm_chart_name: long })],
      ] as const
    ).map(([field, body]) => ({
      what: `${field} over 100 characters`,
      body,
      field,
      error: `${field} must be at most 100 characters`,
    })),
  );

  test('exactly 100 characters is accepted', async () => {
    const hundred = 'a'.repeat(100);
    const res = await create(github({ git_repo_branch: hundred, run_command: hundred }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.git_repo_branch, hundred);
  });
});

describe('wrong JSON types', () => {
  runCases([
    {
      what: 'is_protected given a string',
      body: docker({ is_protected: 'true' }),
      field: 'is_protected',
      error: 'is_protected must be a boolean',
    },
    {
      what: 'deploy_now given a string',
      body: docker({ deploy_now: 'yes' }),
      field: 'deploy_now',
      error: 'deploy_now must be a boolean',
    },
    {
      what: 'enable_previews given a number',
      body: github({ enable_previews: 1 }),
      field: 'enable_previews',
      error: 'enable_previews must be a boolean',
    },
    {
      what: 'docker_image given an array',
      body: docker({ docker_image: ['acme/web'] }),
      field: 'docker_image',
      error: 'docker_image must be a string',
    },
    {
      what: 'ops_json given an object instead of a string',
      body: docker({ ops_json: { deploy_timeout: 5 } }),
      field: 'ops_json',
      error: 'ops_json must be a string',
    },
    {
      what: 'secrets given an object',
      body: docker({ secrets: { KEY: 'value' } }),
      field: 'secrets',
      error: 'secrets must be an array',
    },
    {
      what: 'a secret value given a number',
      body: docker({ secrets: [{ key: 'PORT', value: 8080 }] }),
      field: 'secrets[0].value',
      error: 'secrets[0].value must be a string',
    },
  ]);
});

describe('subdomain and secrets', () => {
  runCases([
    {
      what: 'subdomain supplied',
      body: docker({ subdomain: 'mine' }),
      field: 'subdomain',
      error: /subdomain/,
    },
    {
      what: 'a secret without a key',
      body: docker({ secrets: [{ value: 'x' }] }),
      field: 'secrets[0].key',
      error: 'secrets[0].key is a required field',
    },
    {
      what: 'a secret key empty after trimming',
      body: docker({
        secrets: [
          { key: 'API_KEY', value: 'a' },
          { key: '   ', value: 'b' },
        ],
      }),
      field: 'secrets[1].key',
    },
  ]);

  test('duplicate secret keys: 422 `Duplicate secret key: <key>`', async () => {
    const res = await create(
      docker({
        secrets: [
          { key: 'API_KEY', value: 'a' },
          { key: 'OTHER', value: 'b' },
          { key: 'API_KEY', value: 'c' },
        ],
      }),
    );
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error_code, 'validation');
    assert.equal(res.body.message, 'Duplicate secret key: API_KEY');
  });

  test('keys are compared after trimming', async () => {
    const res = await create(
      docker({
        secrets: [
          { key: 'TOKEN', value: 'a' },
          { key: ' TOKEN ', value: 'b' },
        ],
      }),
    );
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.message, 'Duplicate secret key: TOKEN');
  });

  test('valid secrets seed the service and are readable back', async () => {
    const res = await create(
      docker({
        secrets: [
          { key: 'B_KEY', value: 'two', description: 'second' },
          { key: 'A_KEY', value: 'one' },
        ],
      }),
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const secrets = await h.request(
      'GET',
      `/v1/environments/${t.envId}/services/${res.body.data.service.id}/secrets`,
      { token: t.token },
    );
    assert.equal(secrets.status, 200);
    assert.deepEqual(
      secrets.body.data.secrets.map((s: { key: string; value: string }) => [s.key, s.value]),
      [
        ['A_KEY', 'one'],
        ['B_KEY', 'two'],
      ],
    );
  });
});

describe('ops_json', () => {
  for (const [source, body] of [
    ['github', github()],
    ['gitlab', gitlab()],
    ['helm_chart', helm()],
  ] as const) {
    test(`ops_json with a ${source} source is 500 validation (rule 5)`, async () => {
      const res = await create({ ...body, ops_json: '{"deploy_timeout": 5}' });
      assert.equal(res.status, 500, JSON.stringify(res.body));
      assert.deepEqual(res.body, {
        error_code: 'validation',
        message: 'Ops Json is only supported for docker image source',
        errors: null,
      });
    });
  }

  const healthMax = OPS_LIMITS.healthCheckTimeout.max;
  runCases([
    {
      what: 'not valid JSON',
      body: docker({ ops_json: '{"deploy_timeout": ' }),
      field: 'ops_json',
      error: /JSON/,
    },
    { what: 'a JSON array', body: docker({ ops_json: '[1, 2]' }), field: 'ops_json', error: /object/ },
    {
      what: 'deploy_timeout 21',
      body: ops({ deploy_timeout: 21 }),
      field: 'ops_json.deploy_timeout',
      error: /1 to 20/,
    },
    { what: 'deploy_timeout 0', body: ops({ deploy_timeout: 0 }), field: 'ops_json.deploy_timeout' },
    { what: 'deploy_timeout 2.5', body: ops({ deploy_timeout: 2.5 }), field: 'ops_json.deploy_timeout' },
    {
      what: 'health check timeout over the limit',
      body: ops({ health_check: { type: 'http', path: '/healthz', timeout: healthMax + 1 } }),
      field: 'ops_json.health_check.timeout',
    },
    {
      what: 'health check of an unknown type',
      body: ops({ health_check: { type: 'ping' } }),
      field: 'ops_json.health_check',
    },
    {
      what: 'ingress read_timeout 3601',
      body: ops({ ingress: { read_timeout: 3601 } }),
      field: 'ops_json.ingress.read_timeout',
    },
    {
      what: 'ingress send_timeout 3601',
      body: ops({ ingress: { send_timeout: 3601 } }),
      field: 'ops_json.ingress.send_timeout',
    },
    {
      what: 'ingress connection_timeout 3601',
      body: ops({ ingress: { connection_timeout: 3601 } }),
      field: 'ops_json.ingress.connection_timeout',
    },
    {
      what: 'ingress request_body_size 1025',
      body: ops({ ingress: { request_body_size: 1025 } }),
      field: 'ops_json.ingress.request_body_size',
    },
    {
      what: 'ingress hsts_max_age over two years',
      body: ops({ ingress: { hsts_max_age: 63_072_001 } }),
      field: 'ops_json.ingress.hsts_max_age',
    },
    {
      what: 'ingress https_redirect that is not true or false',
      body: ops({ ingress: { https_redirect: 'no' } }),
      field: 'ops_json.ingress.https_redirect',
    },
    {
      what: 'an ip_whitelist entry that is not a CIDR',
      body: ops({ ingress: { ip_whitelist: ['203.0.113.0/24', 'everyone'] } }),
      field: 'ops_json.ingress.ip_whitelist[1]',
    },
    {
      what: 'a dependency without an id',
      body: ops({ dependencies: { rds: { instances: [{ exports: {} }] } } }),
      field: 'ops_json.dependencies.rds.instances[0].id',
    },
  ]);

  test('several ops_json errors are all reported', async () => {
    const res = await create(
      ops({ deploy_timeout: 21, ingress: { read_timeout: 3601, request_body_size: 1025 } }),
    );
    assertFieldErrors(res, [
      'ops_json.deploy_timeout',
      'ops_json.ingress.read_timeout',
      'ops_json.ingress.request_body_size',
    ]);
  });

  test('the limits themselves are accepted, and ops_json is echoed verbatim', async () => {
    const text = JSON.stringify({
      deploy_timeout: 20,
      health_check: { type: 'tcp', port: 8080, timeout: healthMax },
      ingress: {
        read_timeout: 3600,
        send_timeout: 3600,
        connection_timeout: 3600,
        request_body_size: 1024,
        https_redirect: false,
        hsts_max_age: 63_072_000,
      },
    });
    const res = await create(docker({ ops_json: text }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.data.service.ops_json, text);
  });
});

describe('several errors at once', () => {
  test('shape errors are all reported', async () => {
    const res = await create(
      docker({ name: 'A'.repeat(51), type: 'daemon', port: 0, replica_count: -1, is_protected: 'no' }),
    );
    assertFieldErrors(res, ['name', 'type', 'port', 'replica_count', 'is_protected']);
  });

  test('rule errors are all reported, with secrets and subdomain', async () => {
    const res = await create({
      ...without(docker(), 'port', 'replica_count'),
      name: 'App 1',
      cpu_count_min: 1,
      cpu_count_max: 0.5,
      dockerfile_path: 'Dockerfile',
      subdomain: 'mine',
      secrets: [{ key: ' ' }],
    });
    assertFieldErrors(res, [
      'name',
      'port',
      'replica_count',
      'cpu_count_max',
      'dockerfile_path',
      'secrets[0].key',
      'subdomain',
    ]);
  });

  test('missing requirements of one source are all reported', async () => {
    const res = await create({ name: 'Bare', source: 'github', type: 'web' });
    assertFieldErrors(res, [
      'port',
      'replica_count',
      'cpu_count_min',
      'memory_mb_min',
      'git_repo_full_name',
      'git_repo_branch',
    ]);
  });
});

describe('a successful create', () => {
  test('200 with the service: deploy_pending, generated subdomain, zero custom domain, origin', async () => {
    const env = await h.request('GET', `/v1/environments/${t.envId}`, { token: t.token });
    assert.equal(env.status, 200);
    const ingressHost = env.body.data.ingress_host;
    assert.ok(ingressHost);

    const res = await create(docker());
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.message, 'success');
    const s = res.body.data.service;
    assert.match(s.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(s.name, 'Web App');
    assert.equal(s.source, 'docker_image');
    assert.equal(s.type, 'web');
    assert.equal(s.port, 8080);
    assert.equal(s.replica_count, 2);
    assert.equal(s.cpu_count_min, 0.5);
    assert.equal(s.memory_mb_min, 256);
    assert.equal(s.docker_image, 'acme/web');
    assert.equal(s.state, 'deploy_pending');
    assert.equal(s.account_id, t.accountId);
    assert.equal(s.private_instance_id, t.envId);
    assert.equal(s.is_protected, false);
    assert.equal(s.is_deleted, false);
    assert.equal(s.is_preview, false);
    assert.equal(s.enable_previews, false);
    assert.equal(s.enable_code_review, false);
    assert.equal(s.parent_service_id, null);
    assert.equal(s.latest_deployment, null);
    assert.equal(s.custom_domain_id, ZERO_UUID);
    assert.equal(s.custom_domain, null);
    // "Web App": "Web " -> "web-", then "-" and 8 lower-case alphanumerics.
    assert.match(s.subdomain, /^web--[a-z0-9]{8}$/);
    assert.equal(s.origin, `https://${s.subdomain}.${ingressHost}`);
    assert.match(s.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.match(s.updated_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // Live and get-only fields are not on the create response.
    for (const field of [
      'run_status',
      'ready_count',
      'kube_svc_alias',
      'namespace_name',
      'ip_whitelist',
      'ops_dependencies',
    ])
      assert.equal(field in s, false, `${field} is not on the create response`);
    // Unset fields are omitted: no git, helm or optional resource fields on a docker service.
    for (const field of [
      'git_repo_full_name',
      'git_repo_branch',
      'auto_deploy',
      'dockerfile_path',
      'build_context',
      'ops_json_path',
      'gitlab_connection_id',
      'helm_chart_repo',
      'helm_chart_name',
      'helm_values_yml',
      'docker_registry',
      'run_command',
      'ops_json',
      'cpu_count_max',
      'memory_mb_max',
    ])
      assert.equal(field in s, false, `${field} is omitted`);
  });

  test('the subdomain follows the name: first four characters, lower-cased, spaces to hyphens', async () => {
    for (const [name, prefix] of [
      ['Abc', 'abc'],
      ['A b Cd', 'a-b-'],
      ['PAYMENTS', 'paym'],
      ['Lab App', 'lab-'],
    ] as const) {
      const res = await create(docker({ name }));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.match(res.body.data.service.subdomain, new RegExp(`^${prefix}-[a-z0-9]{8}$`), name);
    }
  });

  test('subdomains are unique within the environment', async () => {
    const subdomains = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const res = await create(docker({ name: 'Same Name' }));
      assert.equal(res.status, 200);
      subdomains.add(res.body.data.service.subdomain);
    }
    assert.equal(subdomains.size, 5);
  });

  test('is_protected is stored, and the service is readable at once', async () => {
    const res = await create(docker({ is_protected: true }));
    assert.equal(res.status, 200);
    assert.equal(res.body.data.service.is_protected, true);
    const got = await h.request('GET', `/v1/environments/${t.envId}/services/${res.body.data.service.id}`, {
      token: t.token,
    });
    assert.equal(got.status, 200);
    assert.equal(got.body.data.service.is_protected, true);
    assert.equal(got.body.data.service.subdomain, res.body.data.service.subdomain);
  });

  test('each accepted create writes exactly one audit entry, service.create', async () => {
    const tenant = await h.tenant();
    const ids: string[] = [];
    for (const body of [docker(), github(), helm()]) {
      const res = await create(body, tenant);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(res.body.data.service.id);
    }
    const audits = await serviceAudits(tenant);
    assert.equal(audits.length, 3);
    for (const id of ids) {
      const entries = audits.filter((a) => a.resource_id === id);
      assert.equal(entries.length, 1, `one entry for ${id}`);
      assert.deepEqual(
        (({
          action,
          resource_type,
          environment_id,
          actor,
          token_id,
          account_id,
        }: Record<string, unknown>) => ({
          action,
          resource_type,
          environment_id,
          actor,
          token_id,
          account_id,
        }))(entries[0] as unknown as Record<string, unknown>),
        {
          action: 'service.create',
          resource_type: 'service',
          environment_id: tenant.envId,
          actor: 'API Token',
          token_id: tenant.tokenId,
          account_id: tenant.accountId,
        },
      );
    }
  });

  test('a rejected create stores nothing and writes no audit entry', async () => {
    const tenant = await h.tenant();
    const field = await create(docker({ port: 0 }), tenant);
    assert.equal(field.status, 422);
    const rule = await create(docker({ name: 'App 1' }), tenant);
    assert.equal(rule.status, 422);
    const dup = await create(
      docker({
        secrets: [
          { key: 'A', value: '1' },
          { key: 'A', value: '2' },
        ],
      }),
      tenant,
    );
    assert.equal(dup.status, 422);
    const opsJson = await create(github({ ops_json: '{}' }), tenant);
    assert.equal(opsJson.status, 500);
    const list = await h.request('GET', `/v1/environments/${tenant.envId}/services`, { token: tenant.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.services, []);
    assert.deepEqual(await serviceAudits(tenant), []);
  });
});

describe('environment state', () => {
  test('an environment that is not available answers 409 conflict, and 200 once it is available', async () => {
    const tenant = await h.tenant();
    for (const state of ['provisioning', 'failed'] as const) {
      await setEnvironmentState(h.deps.store.db, tenant.envId, state);
      const res = await create(docker(), tenant);
      assert.equal(res.status, 409, `${state}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error_code, 'conflict');
      assert.equal(typeof res.body.message, 'string');
      assert.equal(res.body.errors, null);
    }
    // Field validation comes before business rules: a bad body is still 422 there.
    assertFieldErrors(await create(docker({ port: 0 }), tenant), ['port']);
    const list = await h.request('GET', `/v1/environments/${tenant.envId}/services`, { token: tenant.token });
    assert.deepEqual(list.body.data.services, []);
    assert.deepEqual(await serviceAudits(tenant), []);

    await setEnvironmentState(h.deps.store.db, tenant.envId, 'available');
    const ok = await create(docker(), tenant);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  test("another account's environment is 404", async () => {
    const other = await h.tenant();
    const res = await h.request('POST', `/v1/environments/${other.envId}/services`, {
      token: t.token,
      body: docker(),
    });
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { error_code: 'notfound', message: 'Environment not found', errors: null });
  });
});

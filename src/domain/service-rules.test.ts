import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { type ServiceSpec, SPEC_FIELDS, type SpecInput } from './service-fields.ts';
import { businessRuleViolation, checkCreate, checkPatch } from './service-rules.ts';

const GITHUB_WEB: SpecInput = {
  name: 'My App',
  type: 'web',
  source: 'github',
  port: 8080,
  replica_count: 1,
  cpu_count_min: 0.5,
  memory_mb_min: 256,
  git_repo_full_name: 'org/repo',
  git_repo_branch: 'main',
};

const DOCKER_WORKER: SpecInput = {
  name: 'Queue Worker',
  type: 'worker',
  source: 'docker_image',
  replica_count: 2,
  cpu_count_min: 1,
  memory_mb_min: 512,
  docker_image: 'org/worker',
};

const HELM: SpecInput = {
  name: 'Chart Thing',
  source: 'helm_chart',
  helm_chart_repo: 'https://charts.example.com',
  helm_chart_name: 'thing',
};

const fields = (input: SpecInput) => checkCreate(input).errors.map((e) => e.field);
const created = (input: SpecInput): ServiceSpec => {
  const { spec, errors } = checkCreate(input);
  assert.deepEqual(errors, [], 'fixture must be valid');
  return spec;
};

describe('checkCreate: valid services', () => {
  test('a valid service of each source passes', () => {
    for (const input of [GITHUB_WEB, { ...GITHUB_WEB, source: 'gitlab' as const }, DOCKER_WORKER, HELM]) {
      assert.deepEqual(checkCreate(input).errors, [], String(input.source));
    }
  });

  test('the returned spec holds every field, unset ones null and the flags false', () => {
    const spec = created(GITHUB_WEB);
    assert.deepEqual(Object.keys(spec).sort(), [...SPEC_FIELDS].sort());
    assert.equal(spec.is_protected, false);
    assert.equal(spec.enable_previews, false);
    assert.equal(spec.enable_code_review, false);
    assert.equal(spec.cron_schedule, null);
    assert.equal(spec.docker_image, null);
    assert.equal(spec.ops_json, null);
    assert.equal(spec.name, 'My App');
    assert.equal(spec.port, 8080);
  });

  test('fields not in the spec (deploy_now, secrets, subdomain) are not copied into the stored spec', () => {
    const spec = created({ ...GITHUB_WEB, deploy_now: true, subdomain: 'x' } as SpecInput);
    assert.equal('deploy_now' in spec, false);
    assert.equal('subdomain' in spec, false);
  });

  test('a service without a type needs no port', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, type: null, port: undefined }), []);
  });
});

describe('checkCreate: name', () => {
  test('3 to 50 characters', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, name: 'abc' }), []);
    assert.deepEqual(fields({ ...GITHUB_WEB, name: 'a'.repeat(50) }), []);
    const short = checkCreate({ ...GITHUB_WEB, name: 'ab' }).errors;
    assert.deepEqual(short, [{ field: 'name', error: 'name must be at least 3 characters' }]);
    const long = checkCreate({ ...GITHUB_WEB, name: 'a'.repeat(51) }).errors;
    assert.deepEqual(long, [{ field: 'name', error: 'name must be at most 50 characters' }]);
  });

  test('letters and spaces only: digits, hyphens and underscores are rejected', () => {
    for (const name of ['App 2', 'my-app', 'my_app', 'café', 'app!']) {
      assert.deepEqual(fields({ ...GITHUB_WEB, name }), ['name'], name);
    }
    assert.deepEqual(fields({ ...GITHUB_WEB, name: 'My Great App' }), []);
  });

  test('the name is trimmed before it is checked and stored', () => {
    assert.equal(created({ ...GITHUB_WEB, name: '  My App  ' }).name, 'My App');
    assert.deepEqual(fields({ ...GITHUB_WEB, name: '  ab  ' }), ['name']);
    assert.deepEqual(fields({ ...GITHUB_WEB, name: '     ' }), ['name']);
  });
});

describe('checkCreate: required fields', () => {
  test('resources are required unless the source is helm_chart', () => {
    for (const field of ['replica_count', 'cpu_count_min', 'memory_mb_min'] as const) {
      for (const base of [GITHUB_WEB, DOCKER_WORKER]) {
        const { errors } = checkCreate({ ...base, [field]: undefined });
        assert.deepEqual(
          errors,
          [{ field, error: `${field} is a required field` }],
          `${base.source} ${field}`,
        );
      }
    }
    assert.deepEqual(fields(HELM), []);
  });

  test('zero is a value, not a missing field (replica_count minimum is 0)', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, replica_count: 0 }), []);
    assert.equal(created({ ...GITHUB_WEB, replica_count: 0 }).replica_count, 0);
  });

  test('git sources need git_repo_full_name and git_repo_branch', () => {
    for (const source of ['github', 'gitlab'] as const) {
      assert.deepEqual(
        fields({ ...GITHUB_WEB, source, git_repo_full_name: undefined, git_repo_branch: '' }),
        ['git_repo_full_name', 'git_repo_branch'],
        source,
      );
    }
  });

  test('docker_image source needs docker_image; helm_chart needs repo and name', () => {
    assert.deepEqual(fields({ ...DOCKER_WORKER, docker_image: undefined }), ['docker_image']);
    assert.deepEqual(fields({ ...HELM, helm_chart_repo: undefined, helm_chart_name: null }), [
      'helm_chart_repo',
      'helm_chart_name',
    ]);
  });

  test('port is required for web and internal, not for worker, cron or job', () => {
    for (const type of ['web', 'internal'] as const) {
      assert.deepEqual(checkCreate({ ...GITHUB_WEB, type, port: undefined }).errors, [
        { field: 'port', error: 'port is a required field' },
      ]);
    }
    for (const type of ['worker', 'job'] as const) {
      assert.deepEqual(fields({ ...GITHUB_WEB, type, port: undefined }), [], type);
    }
  });

  test('cron_schedule is required for cron and must be a cron expression', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, type: 'cron', port: undefined }), ['cron_schedule']);
    assert.deepEqual(fields({ ...GITHUB_WEB, type: 'cron', cron_schedule: '*/5 * * * *' }), []);
    const bad = checkCreate({ ...GITHUB_WEB, type: 'cron', cron_schedule: 'every five minutes' }).errors;
    assert.deepEqual(
      bad.map((e) => e.field),
      ['cron_schedule'],
    );
    assert.match(bad[0]?.error ?? '', /cron expression/);
    assert.deepEqual(fields({ ...GITHUB_WEB, type: 'worker', cron_schedule: '61 * * * *' }), [
      'cron_schedule',
    ]);
  });

  test('errors come in the order of the spec table', () => {
    assert.deepEqual(
      fields({
        ...GITHUB_WEB,
        name: 'x1',
        port: undefined,
        replica_count: undefined,
        git_repo_branch: undefined,
        docker_image: 'nginx',
        helm_chart_name: 'chart',
      }),
      ['name', 'port', 'replica_count', 'git_repo_branch', 'docker_image', 'helm_chart_name'],
    );
  });
});

describe('checkCreate: fields bound to a source', () => {
  test('a field of another source is refused with a message naming the sources it belongs to', () => {
    assert.deepEqual(checkCreate({ ...GITHUB_WEB, docker_registry: 'ghcr.io' }).errors, [
      { field: 'docker_registry', error: 'docker_registry is only allowed for the docker_image source' },
    ]);
    assert.deepEqual(checkCreate({ ...HELM, run_command: 'npm start' }).errors, [
      {
        field: 'run_command',
        error: 'run_command is only allowed for github, gitlab and docker_image sources',
      },
    ]);
    assert.deepEqual(checkCreate({ ...DOCKER_WORKER, git_repo_branch: 'main' }).errors, [
      { field: 'git_repo_branch', error: 'git_repo_branch is only allowed for github and gitlab sources' },
    ]);
    assert.deepEqual(fields({ ...GITHUB_WEB, helm_values_yml: 'a: 1' }), ['helm_values_yml']);
  });

  test('git-only fields are refused for docker_image and helm_chart', () => {
    for (const field of [
      'installation_id',
      'auto_deploy',
      'dockerfile_path',
      'build_context',
      'ops_json_path',
    ]) {
      const value = field === 'auto_deploy' ? true : field === 'installation_id' ? randomUUID() : 'x';
      assert.deepEqual(fields({ ...DOCKER_WORKER, [field]: value }), [field], field);
      assert.deepEqual(fields({ ...HELM, [field]: value }), [field], field);
      assert.deepEqual(fields({ ...GITHUB_WEB, [field]: value }), [], field);
    }
  });

  test('enable_previews and enable_code_review are github only, but false is accepted anywhere', () => {
    const gitlab = { ...GITHUB_WEB, source: 'gitlab' as const };
    assert.deepEqual(fields({ ...gitlab, enable_previews: true, enable_code_review: true }), [
      'enable_previews',
      'enable_code_review',
    ]);
    assert.deepEqual(fields({ ...gitlab, enable_previews: false, enable_code_review: false }), []);
    assert.deepEqual(fields({ ...GITHUB_WEB, enable_previews: true, enable_code_review: true }), []);
  });

  test('run_command is accepted for git and docker_image sources', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, run_command: 'npm start' }), []);
    assert.deepEqual(fields({ ...DOCKER_WORKER, run_command: 'node worker.js' }), []);
  });
});

describe('checkCreate: cross-field rules', () => {
  test('auto_deploy is rejected when type is job; false is fine', () => {
    assert.deepEqual(checkCreate({ ...GITHUB_WEB, type: 'job', auto_deploy: true }).errors, [
      { field: 'auto_deploy', error: 'auto_deploy cannot be set when type is job' },
    ]);
    assert.deepEqual(fields({ ...GITHUB_WEB, type: 'job', auto_deploy: false }), []);
    assert.deepEqual(fields({ ...GITHUB_WEB, type: 'worker', auto_deploy: true }), []);
  });

  test('enable_previews is allowed only when type is web', () => {
    for (const type of ['internal', 'worker', 'cron', 'job', null] as const) {
      const input = { ...GITHUB_WEB, type, cron_schedule: type === 'cron' ? '0 * * * *' : undefined };
      assert.deepEqual(fields({ ...input, enable_previews: true }), ['enable_previews'], String(type));
    }
    assert.deepEqual(fields({ ...GITHUB_WEB, enable_previews: true }), []);
  });

  test('cpu_count_max and memory_mb_max may not be below their minimum; equal is fine', () => {
    assert.deepEqual(fields({ ...GITHUB_WEB, cpu_count_max: 0.25 }), ['cpu_count_max']);
    assert.deepEqual(fields({ ...GITHUB_WEB, cpu_count_max: 0.5 }), []);
    assert.deepEqual(fields({ ...GITHUB_WEB, memory_mb_max: 128 }), ['memory_mb_max']);
    assert.deepEqual(fields({ ...GITHUB_WEB, memory_mb_max: 256 }), []);
    assert.deepEqual(fields({ ...GITHUB_WEB, cpu_count_max: 4, memory_mb_max: 4096 }), []);
  });

  test('git_repo_full_name has the org/repo form', () => {
    for (const name of ['org/repo', 'my.org/my_repo-2', 'group/subgroup/repo']) {
      assert.deepEqual(fields({ ...GITHUB_WEB, git_repo_full_name: name }), [], name);
    }
    for (const name of ['repo', 'org/', '/repo', 'org repo/x', 'https://github.com/org/repo']) {
      assert.deepEqual(fields({ ...GITHUB_WEB, git_repo_full_name: name }), ['git_repo_full_name'], name);
    }
  });

  test('docker_image is a repository without a tag; docker_registry is a host', () => {
    for (const image of ['nginx', 'org/app', 'library/nginx', 'a/b/c-d_e.f']) {
      assert.deepEqual(fields({ ...DOCKER_WORKER, docker_image: image }), [], image);
    }
    for (const image of ['nginx:latest', 'Org/App', 'org/app@sha256:abc', 'org//app']) {
      assert.deepEqual(fields({ ...DOCKER_WORKER, docker_image: image }), ['docker_image'], image);
    }
    for (const registry of ['registry.example.com', 'localhost:5000', 'ghcr.io', 'reg.example.com/team']) {
      assert.deepEqual(fields({ ...DOCKER_WORKER, docker_registry: registry }), [], registry);
    }
    for (const registry of ['https://registry.example.com', 'host:port', 'a b']) {
      assert.deepEqual(
        fields({ ...DOCKER_WORKER, docker_registry: registry }),
        ['docker_registry'],
        registry,
      );
    }
  });
});

describe('checkCreate: trimming', () => {
  test('dockerfile_path, ops_json_path and build_context are trimmed; blank build_context is unset', () => {
    const spec = created({
      ...GITHUB_WEB,
      dockerfile_path: '  docker/Dockerfile ',
      ops_json_path: '\tops.json\n',
      build_context: '  app  ',
    });
    assert.equal(spec.dockerfile_path, 'docker/Dockerfile');
    assert.equal(spec.ops_json_path, 'ops.json');
    assert.equal(spec.build_context, 'app');
    assert.equal(created({ ...GITHUB_WEB, build_context: '   ' }).build_context, null);
  });

  test('a blank build_context is unset, so it is not an error for a non-git source', () => {
    assert.deepEqual(fields({ ...DOCKER_WORKER, build_context: '   ' }), []);
  });

  test('the input object is not modified', () => {
    const input = { ...GITHUB_WEB, name: '  My App ', dockerfile_path: ' Dockerfile ' };
    const copy = structuredClone(input);
    checkCreate(input);
    assert.deepEqual(input, copy);
  });
});

describe('ops_json and rule 5', () => {
  test('valid ops_json is accepted for docker_image', () => {
    const ops_json = JSON.stringify({ deploy_timeout: 10, ingress: { request_body_size: 100 } });
    assert.deepEqual(fields({ ...DOCKER_WORKER, ops_json }), []);
    assert.equal(businessRuleViolation(created({ ...DOCKER_WORKER, ops_json })), null);
  });

  test('invalid ops_json on docker_image gives field errors with paths under ops_json', () => {
    assert.deepEqual(fields({ ...DOCKER_WORKER, ops_json: '{' }), ['ops_json']);
    assert.deepEqual(
      fields({
        ...DOCKER_WORKER,
        ops_json: JSON.stringify({ deploy_timeout: 21, ingress: { read_timeout: 0 } }),
      }),
      ['ops_json.ingress.read_timeout', 'ops_json.deploy_timeout'],
    );
  });

  test('ops_json with another source is no field error but a business rule violation with the spec message', () => {
    for (const base of [GITHUB_WEB, { ...GITHUB_WEB, source: 'gitlab' as const }, HELM]) {
      const { spec, errors } = checkCreate({ ...base, ops_json: '{}' });
      assert.deepEqual(errors, [], String(base.source));
      assert.equal(businessRuleViolation(spec), 'Ops Json is only supported for docker image source');
    }
  });

  test('no ops_json is never a violation', () => {
    for (const base of [GITHUB_WEB, DOCKER_WORKER, HELM])
      assert.equal(businessRuleViolation(created(base)), null);
  });
});

describe('checkPatch', () => {
  const patchFields = (current: ServiceSpec, input: SpecInput) =>
    checkPatch(current, input).errors.map((e) => e.field);

  test('an empty patch keeps the service as it is', () => {
    const current = created(GITHUB_WEB);
    const { spec, errors } = checkPatch(current, {});
    assert.deepEqual(errors, []);
    assert.deepEqual(spec, current);
  });

  test('a patch merges over the current spec without modifying it', () => {
    const current = created(GITHUB_WEB);
    const before = structuredClone(current);
    const { spec, errors } = checkPatch(current, { replica_count: 3, git_repo_branch: 'release' });
    assert.deepEqual(errors, []);
    assert.equal(spec.replica_count, 3);
    assert.equal(spec.git_repo_branch, 'release');
    assert.equal(spec.git_repo_full_name, 'org/repo');
    assert.deepEqual(current, before);
  });

  test('names may also contain hyphens, but not digits or underscores', () => {
    const current = created(GITHUB_WEB);
    assert.deepEqual(patchFields(current, { name: 'my-app' }), []);
    assert.equal(checkPatch(current, { name: ' my-app ' }).spec.name, 'my-app');
    assert.deepEqual(patchFields(current, { name: 'my_app' }), ['name']);
    assert.deepEqual(patchFields(current, { name: 'app 2' }), ['name']);
    assert.deepEqual(patchFields(current, { name: 'ab' }), ['name']);
    assert.deepEqual(patchFields(current, { name: 'a'.repeat(51) }), ['name']);
  });

  test('the merged result must pass the create rules', () => {
    const current = created(GITHUB_WEB);
    assert.deepEqual(patchFields(current, { type: 'cron' }), ['cron_schedule']);
    assert.deepEqual(patchFields(current, { type: 'cron', cron_schedule: '0 3 * * *' }), []);
    assert.deepEqual(patchFields(current, { port: null }), ['port']);
    assert.deepEqual(patchFields(current, { replica_count: null }), ['replica_count']);
    assert.deepEqual(patchFields(current, { cpu_count_max: 0.1 }), ['cpu_count_max']);
    assert.deepEqual(patchFields(current, { docker_image: 'nginx' }), ['docker_image']);
    assert.deepEqual(patchFields(current, { type: 'worker', enable_previews: true }), ['enable_previews']);
  });

  test('a rule that depends on the current value is checked against the merged result', () => {
    const current = created({ ...GITHUB_WEB, enable_previews: true, auto_deploy: true });
    assert.deepEqual(patchFields(current, { type: 'internal' }), ['enable_previews']);
    assert.deepEqual(patchFields(current, { type: 'job', enable_previews: false }), ['auto_deploy']);
  });

  test('a job-typed service patched without auto_deploy is fine', () => {
    const current = created({ ...GITHUB_WEB, type: 'job', port: undefined });
    assert.deepEqual(patchFields(current, { replica_count: 4 }), []);
    assert.deepEqual(patchFields(current, { auto_deploy: false }), []);
    assert.deepEqual(patchFields(current, { auto_deploy: true }), ['auto_deploy']);
  });

  test("changing source requires the new source's own fields in the same request; resources carry over", () => {
    const current = created(GITHUB_WEB);
    assert.deepEqual(patchFields(current, { source: 'docker_image' }), ['docker_image']);
    assert.deepEqual(patchFields(current, { source: 'docker_image', docker_image: 'acme/web' }), []);
    assert.deepEqual(patchFields(current, { source: 'helm_chart' }), ['helm_chart_repo', 'helm_chart_name']);
    // Even a field kept across the change (gitlab is a git source too) must be sent again.
    assert.deepEqual(patchFields(current, { source: 'gitlab' }), ['git_repo_full_name', 'git_repo_branch']);
  });

  test('changing from helm_chart to a source that needs resources requires them', () => {
    const current = created({
      name: 'Chart',
      source: 'helm_chart',
      helm_chart_repo: 'https://c',
      helm_chart_name: 'c',
    });
    assert.deepEqual(patchFields(current, { source: 'docker_image', docker_image: 'acme/web' }), [
      'replica_count',
      'cpu_count_min',
      'memory_mb_min',
    ]);
  });

  test('changing source clears the fields that belong only to the old source', () => {
    const current = created({
      ...GITHUB_WEB,
      installation_id: '5c0e5f6a-6f44-4b0c-9d2e-3b1f0f4f1a11',
      auto_deploy: true,
      dockerfile_path: 'Dockerfile',
      build_context: 'app',
      ops_json_path: 'ops.json',
      run_command: 'npm start',
      enable_previews: true,
      enable_code_review: true,
    });
    const { spec, errors } = checkPatch(current, {
      source: 'docker_image',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'org/app',
    });
    assert.deepEqual(errors, []);
    assert.equal(spec.source, 'docker_image');
    assert.equal(spec.docker_image, 'org/app');
    for (const field of [
      'installation_id',
      'git_repo_full_name',
      'git_repo_branch',
      'auto_deploy',
      'dockerfile_path',
      'build_context',
      'ops_json_path',
    ] as const) {
      assert.equal(spec[field], null, field);
    }
    assert.equal(spec.enable_previews, false);
    assert.equal(spec.enable_code_review, false);
    assert.equal(spec.run_command, 'npm start', 'run_command also belongs to docker_image');
    assert.equal(spec.port, 8080);
    assert.equal(spec.name, 'My App');
  });

  test('changing away from docker_image clears the registry, image and ops_json', () => {
    const current = created({ ...DOCKER_WORKER, docker_registry: 'ghcr.io', ops_json: '{}' });
    const { spec, errors } = checkPatch(current, {
      source: 'helm_chart',
      helm_chart_repo: 'https://charts.example.com',
      helm_chart_name: 'worker',
    });
    assert.deepEqual(errors, []);
    assert.equal(spec.docker_registry, null);
    assert.equal(spec.docker_image, null);
    assert.equal(spec.ops_json, null);
    assert.equal(businessRuleViolation(spec), null);
  });

  test('ops_json sent together with a change away from docker_image is a business rule violation', () => {
    const current = created(DOCKER_WORKER);
    const { spec, errors } = checkPatch(current, {
      source: 'github',
      replica_count: 1,
      cpu_count_min: 1,
      memory_mb_min: 512,
      git_repo_full_name: 'org/repo',
      git_repo_branch: 'main',
      ops_json: '{}',
    });
    assert.deepEqual(errors, []);
    assert.equal(businessRuleViolation(spec), 'Ops Json is only supported for docker image source');
  });

  test('setting ops_json on a git service is a business rule violation', () => {
    const { spec, errors } = checkPatch(created(GITHUB_WEB), { ops_json: '{"deploy_timeout": 3}' });
    assert.deepEqual(errors, []);
    assert.equal(businessRuleViolation(spec), 'Ops Json is only supported for docker image source');
  });

  test('invalid ops_json patched into a docker_image service gives field errors', () => {
    const current = created(DOCKER_WORKER);
    assert.deepEqual(patchFields(current, { ops_json: JSON.stringify({ deploy_timeout: 30 }) }), [
      'ops_json.deploy_timeout',
    ]);
  });

  test('a field of another source is refused when the source does not change', () => {
    assert.deepEqual(patchFields(created(GITHUB_WEB), { helm_chart_name: 'x' }), ['helm_chart_name']);
    assert.deepEqual(patchFields(created(DOCKER_WORKER), { source: 'docker_image', git_repo_branch: 'x' }), [
      'git_repo_branch',
    ]);
  });

  test('sending the same source is not a change of source', () => {
    assert.deepEqual(patchFields(created(GITHUB_WEB), { source: 'github' }), []);
  });

  test('trimming applies to patches too', () => {
    const { spec } = checkPatch(created(GITHUB_WEB), {
      dockerfile_path: ' Dockerfile ',
      build_context: '  ',
    });
    assert.equal(spec.dockerfile_path, 'Dockerfile');
    assert.equal(spec.build_context, null);
  });
});

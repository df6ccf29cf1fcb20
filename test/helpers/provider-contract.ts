import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_OPS_CONFIG } from '../../src/domain/ops-json.ts';
import { SupersededError, TerminalError } from '../../src/jobs/errors.ts';
import type { DesiredService, EnvironmentRef, Provider, RuntimeSpec } from '../../src/providers/provider.ts';

/**
 * The provider contract: one suite every driver passes (sim in test/lifecycle, docker in test/docker).
 * A driver supplies a runnable service spec, a way to make a desired state fail for good, and a
 * fingerprint of what runs (it changes on every rollout, and only then).
 */
export interface ContractDriver {
  provider: Provider;
  environment: EnvironmentRef;
  /** A service this driver can run (its image, command, type). */
  spec(): Partial<RuntimeSpec>;
  /** The same desired state, changed so that applying it fails with a TerminalError. */
  failing(desired: DesiredService): DesiredService;
  /** What runs for the service, as a value that changes on every rollout and only then. */
  fingerprint(serviceId: string): Promise<string>;
  close(): Promise<void>;
}

const never = new AbortController().signal;

/** A worker service of the environment with the given id, named after it, changed by `extra`. */
export function serviceSpecIn(
  environment: EnvironmentRef,
  id: string,
  extra: Partial<RuntimeSpec>,
): RuntimeSpec {
  return {
    id,
    account_id: environment.account_id,
    environment_id: environment.id,
    name: `Service ${id.slice(0, 8)}`,
    subdomain: `service-${id.slice(0, 8)}`,
    type: 'worker',
    source: 'docker_image',
    port: null,
    cron_schedule: null,
    replica_count: 1,
    cpu_count_min: 0.25,
    cpu_count_max: null,
    memory_mb_min: 32,
    memory_mb_max: null,
    docker_image: null,
    docker_registry: null,
    git_repo_full_name: null,
    git_repo_branch: null,
    build_context: null,
    dockerfile_path: null,
    ops_json_path: null,
    run_command: null,
    helm_chart_repo: null,
    helm_chart_name: null,
    prov_node_group_id: null,
    ...extra,
  };
}

export function providerContract(name: string, setup: () => Promise<ContractDriver>): void {
  describe(`the provider contract: ${name}`, () => {
    let d: ContractDriver;
    before(async () => {
      d = await setup();
      await d.provider.ensureEnvironment(d.environment);
    });
    after(() => d.close());

    function desired(serviceId: string, generation: number, extra: Partial<DesiredService> = {}) {
      const service = serviceSpecIn(d.environment, serviceId, {
        name: `Contract ${serviceId.slice(0, 8)}`,
        subdomain: `contract-${serviceId.slice(0, 8)}`,
        ...d.spec(),
      });
      return {
        service,
        environment: d.environment,
        deploymentId: randomUUID(),
        generation,
        target: { commit_id: '', docker_image_tag: 'latest', helm_chart_version: '' },
        ops: DEFAULT_OPS_CONFIG,
        variables: { GREETING: 'hello' },
        domains: [],
        ...extra,
      } satisfies DesiredService;
    }

    test('ensureEnvironment is idempotent; identity is stable', async () => {
      await d.provider.ensureEnvironment(d.environment);
      const first = await d.provider.identity(d.environment);
      assert.deepEqual(await d.provider.identity(d.environment), first);
      assert.ok(first.ingress_host.length > 0);
      assert.ok(Array.isArray(first.public_nat_ips));
    });

    test('observe: a service never applied is not deployed', async () => {
      const ref = desired(randomUUID(), 1).service;
      assert.deepEqual(await d.provider.observe(ref), {
        run_status: 'not_deployed',
        ready_count: 0,
        generation: null,
      });
    });

    test('apply runs the service; applying the same desired state again rolls nothing out', async () => {
      const want = desired(randomUUID(), 10);
      const applied = await d.provider.apply(want, never);
      assert.ok(applied.provDeploymentId);
      assert.match(applied.svcAlias, new RegExp(`^${want.service.subdomain}\\.`));
      const observed = await d.provider.observe(want.service);
      assert.deepEqual(observed, { run_status: 'running', ready_count: 1, generation: 10 });
      const before = await d.fingerprint(want.service.id);
      const again = await d.provider.apply(want, never);
      assert.deepEqual(
        [again.provDeploymentId, again.namespaceName, again.svcAlias],
        [applied.provDeploymentId, applied.namespaceName, applied.svcAlias],
        'the second apply reports the first',
      );
      assert.equal(await d.fingerprint(want.service.id), before, 'one rollout, not two');
    });

    test('a newer generation replaces what runs; an older one is refused and changes nothing', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 20), never);
      await d.provider.apply(desired(id, 21), never);
      const newest = await d.fingerprint(id);
      await assert.rejects(d.provider.apply(desired(id, 20), never), SupersededError);
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 21);
      assert.equal(await d.fingerprint(id), newest, 'the newer generation keeps running');
    });

    test('a terminal failure is a TerminalError and leaves what runs in place', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 30), never);
      const running = await d.fingerprint(id);
      await assert.rejects(d.provider.apply(d.failing(desired(id, 31)), never), TerminalError);
      assert.equal(await d.fingerprint(id), running);
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 30);
    });

    test('an aborted apply (the worker lost its job) makes no change', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 40), never);
      const running = await d.fingerprint(id);
      const lost = new AbortController();
      lost.abort(new Error('the lease of this job was lost'));
      await assert.rejects(d.provider.apply(desired(id, 41), lost.signal), /lease of this job was lost/);
      assert.equal(await d.fingerprint(id), running);
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 40);
    });

    test('remove tears the service down, twice is harmless, and no later apply brings it back', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 50), never);
      const ref = desired(id, 0).service;
      await d.provider.remove(ref);
      await d.provider.remove(ref);
      assert.deepEqual(await d.provider.observe(ref), {
        run_status: 'deleted',
        ready_count: 0,
        generation: null,
      });
      await assert.rejects(d.provider.apply(desired(id, 51), never), SupersededError);
      assert.equal((await d.provider.observe(ref)).run_status, 'deleted');
    });
  });
}

import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_OPS_CONFIG, type OpsResource } from '../../src/domain/ops-json.ts';
import { SupersededError, TerminalError } from '../../src/jobs/errors.ts';
import {
  DeployFailed,
  type DeployLog,
  DeploymentCancelled,
  type DesiredService,
  type EnvironmentRef,
  type LogLine,
  type Provider,
  type RuntimeSpec,
  SILENT_LOG,
} from '../../src/providers/provider.ts';
import { pollUntil } from './poll.ts';

/** The seam's optional members: a driver has one exactly when it declares it (a capability). */
export const CAPABILITIES = ['serving', 'secrets', 'resources', 'backups', 'sources', 'admission'] as const;
export type Capability = (typeof CAPABILITIES)[number];

/**
 * The provider contract: one suite every driver passes (sim in test/lifecycle, docker in test/docker,
 * swarm in test/swarm), over every member of the seam: environments, apply (with its fence, failures,
 * a lost lease and a user's cancel), observe, remove, logs, jobs, cron and the optional capabilities.
 * A driver supplies a runnable service spec, a way to make a desired state fail for good, a fingerprint
 * of what runs (it changes on every rollout, and only then), and declares the capabilities it has.
 */
export interface ContractDriver {
  provider: Provider;
  environment: EnvironmentRef;
  /** The optional members this driver has; the suite checks it has these and no other. */
  capabilities: readonly Capability[];
  /** A service this driver can run (its image, command, type). */
  spec(): Partial<RuntimeSpec>;
  /** A command that prints `text` once (then exits, for jobs and cron runs). */
  printOnce(text: string): Partial<RuntimeSpec>;
  /** A command that keeps printing `text` (a worker's replicas). */
  printEvery(text: string): Partial<RuntimeSpec>;
  /**
   * True when the logs are the workload's own output (they then contain what it printed); false for a
   * simulated runtime, whose lines are made up but timed and shaped like a real one's.
   */
  realLogs: boolean;
  /**
   * With the resources capability: a dependency the driver makes, one it refuses by name, and what it
   * made for a service's dependency ('' when nothing), a value that changes when it is made anew.
   */
  resources?: {
    makes: OpsResource;
    refuses: OpsResource;
    fingerprint(serviceId: string, resource: OpsResource): Promise<string>;
  };
  /**
   * With the sources capability: a git repository whose branch holds `files` (path to text), as the
   * fields of a service that builds from it.
   */
  repository?(files: Record<string, string>): Promise<Partial<RuntimeSpec>>;
  /** With the admission capability: a change to the contract's service that the driver refuses. */
  refused?: Partial<RuntimeSpec>;
  /** A web service whose route answers `text` (a deployment's id) at `/`. */
  serve(text: string): Partial<RuntimeSpec>;
  /**
   * What the service's route answers at `/` through the driver's ingress (trimmed), or null when nothing
   * answers for it; for a runtime without an ingress, the deployment its route leads to.
   */
  answer(service: { id: string; subdomain: string }): Promise<string | null>;
  /**
   * The variables each running replica of a deployment of the service has in its environment, each
   * value as its SHA-256 (hex): read from the process for a real runtime; what its replicas were given
   * for a simulated one.
   */
  environments(serviceId: string, deploymentId: string): Promise<Record<string, string>[]>;
  /** With the secrets capability: a scope's secrets as the driver's store holds them, values as SHA-256. */
  storedSecrets?(scope: 'service' | 'environment', scopeId: string): Promise<Record<string, string>>;
  /** A command that prints `text` and exits with `code` (a job that fails). */
  printAndExit(text: string, code: number): Partial<RuntimeSpec>;
  /** The same desired state, changed so that applying it fails with a TerminalError. */
  failing(desired: DesiredService): DesiredService;
  /** What runs for the service, as a value that changes on every rollout and only then. */
  fingerprint(serviceId: string): Promise<string>;
  close(): Promise<void>;
}

const never = new AbortController().signal;

export const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

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
      // Serving runs cron schedules (and the docker ingress) beside the API: the cron test needs it.
      await d.provider.serving?.start();
    });
    // The driver's close (provider.close) stops serving, as at the end of `berth serve`.
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

    /** The contract's service spec of `serviceId`, changed by `extra`. */
    const specOf = (serviceId: string, extra: Partial<RuntimeSpec>) => ({
      ...desired(serviceId, 0).service,
      ...extra,
    });

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

    test('a rollout cut short because its worker lost the job runs in full for the worker that takes it over', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 45), never);
      const lost = new AbortController();
      const log: DeployLog = {
        ...SILENT_LOG,
        mark: (mark) => {
          if (mark === 'image_resolved') lost.abort(new Error('the lease of this job was lost'));
        },
      };
      const deployment = desired(id, 46);
      await assert.rejects(d.provider.apply(deployment, lost.signal, log), /lease of this job was lost/);
      assert.ok(lost.signal.aborted, 'the lease was lost during the rollout');
      // The same deployment again, as the job's next holder runs it: not a failure the first one left.
      await d.provider.apply(deployment, never);
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 46);
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

    test('metrics: what runs has samples of plausible values; a service never applied, or removed, has none', async () => {
      const id = randomUUID();
      const want = desired(id, 60);
      const subject = { ...want.service, memory_mb_max: 256 };
      assert.equal(await d.provider.metrics.sample(subject), null, 'never applied');
      await d.provider.apply({ ...want, service: subject }, never);
      await d.provider.metrics.sample(subject);
      // The second sample has a previous one to count counters from.
      const sample = await d.provider.metrics.sample(subject);
      assert.ok(sample, 'a running service has a sample');
      for (const [name, value] of Object.entries(sample))
        assert.ok(value === null || (Number.isFinite(value) && value >= 0), `${name}: ${value}`);
      assert.equal(sample.memory_limit_bytes, 256 * 1024 * 1024);
      if (sample.memory_bytes !== null) assert.ok(sample.memory_bytes > 0);
      assert.equal(sample.requests, 0, 'a worker has no ingress traffic');
      assert.equal(sample.latency_p50_ms, null);
      await d.provider.remove(subject);
      assert.equal(await d.provider.metrics.sample(subject), null, 'removed');
    });

    test('a failing job: a run that exits non-zero fails its apply with the exit code, observes as failed, and what it printed is in its logs', async () => {
      const id = randomUUID();
      const text = `contract-fail-${id.slice(0, 8)}`;
      const service = specOf(id, { ...d.printAndExit(text, 3), type: 'job' });
      await assert.rejects(
        d.provider.apply(desired(id, 75, { service }), never),
        (error: Error) => error instanceof DeployFailed && /the job exited with code 3\b/.test(error.message),
      );
      const ref = { ...desired(id, 0).service, type: 'job' as const };
      assert.equal((await d.provider.observe(ref)).run_status, 'failed');
      await linesOf(id, 10, (lines) => printed(lines, text));
      await d.provider.remove(ref);
    });

    test("variables: a deployment's are in its running replicas' environment; the next deployment's set replaces them whole", async () => {
      const id = randomUUID();
      const contractVariables = (environment: Record<string, string>) =>
        Object.fromEntries(Object.entries(environment).filter(([name]) => name.startsWith('CONTRACT_')));
      const expect = async (deploymentId: string, variables: Record<string, string>) => {
        const environments = await d.environments(id, deploymentId);
        assert.ok(environments.length > 0, 'a replica runs');
        for (const environment of environments)
          assert.deepEqual(
            contractVariables(environment),
            Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, sha256(value)])),
          );
      };
      const first = { CONTRACT_KEPT: 'first value', CONTRACT_DROPPED: "it's gone next" };
      const one = desired(id, 1, { variables: first });
      await d.provider.apply(one, never);
      await expect(one.deploymentId, first);
      const second = { CONTRACT_KEPT: 'second value' };
      const two = desired(id, 2, { variables: second });
      await d.provider.apply(two, never);
      await expect(two.deploymentId, second);
      await d.provider.remove(desired(id, 0).service);
    });

    test('serving: a web service answers through its route with the version deployed, the next version once it is rolled out, and nothing once removed', async () => {
      const id = randomUUID();
      const service = specOf(id, {});
      const deploy = async (generation: number) => {
        const want = desired(id, generation);
        await d.provider.apply({ ...want, service: { ...service, ...d.serve(want.deploymentId) } }, never);
        return want.deploymentId;
      };
      const first = await deploy(1);
      assert.equal(await d.answer(service), first);
      const second = await deploy(2);
      assert.equal(await d.answer(service), second, 'the route leads to the new version once apply resolves');
      await d.provider.remove({ ...service, type: 'web' });
      assert.equal(await d.answer(service), null, 'nothing answers for a removed service');
    });

    test("secrets: a write is the scope's whole set: it replaces what the store held, and an empty one clears it", async () => {
      const { secrets } = d.provider;
      if (!secrets || !d.storedSecrets) {
        assert.equal(d.capabilities.includes('secrets'), false, 'a driver without a store declares none');
        return;
      }
      const scopeId = randomUUID();
      const stored = () => d.storedSecrets?.('service', scopeId);
      await secrets.write('service', scopeId, { KEPT: 'one', DROPPED: 'two' });
      assert.deepEqual(await stored(), { KEPT: sha256('one'), DROPPED: sha256('two') });
      await secrets.write('service', scopeId, { KEPT: 'three' });
      assert.deepEqual(await stored(), { KEPT: sha256('three') });
      assert.deepEqual(await d.storedSecrets?.('environment', scopeId), {}, 'scopes are apart');
      await secrets.write('service', scopeId, {});
      assert.deepEqual(await stored(), {});
    });

    test('the optional members are exactly the capabilities the driver declares', () => {
      const has = CAPABILITIES.filter((member) => d.provider[member] !== undefined);
      assert.deepEqual(
        has,
        CAPABILITIES.filter((member) => d.capabilities.includes(member)),
      );
      assert.equal(d.capabilities.includes('resources'), d.resources !== undefined, 'resources to try');
      assert.equal(d.capabilities.includes('admission'), d.refused !== undefined, 'a service to refuse');
      if (d.capabilities.includes('backups'))
        assert.ok(d.capabilities.includes('resources'), 'backups are of the dependencies it makes');
      assert.equal(d.capabilities.includes('sources'), d.repository !== undefined, 'a repository to read');
      assert.equal(d.capabilities.includes('secrets'), d.storedSecrets !== undefined, 'a store to read');
    });

    /** The lines `read` yields now (no follow), waiting until `enough` says they are. */
    const linesOf = (serviceId: string, tail: number, enough: (lines: LogLine[]) => boolean) =>
      pollUntil(
        `the logs of ${serviceId}`,
        async () => {
          const lines: LogLine[] = [];
          const ref = desired(serviceId, 0).service;
          const query = { tail, follow: false, signal: never };
          for await (const line of d.provider.logs.read(ref, query)) lines.push(line);
          return enough(lines) ? lines : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );

    const printed = (lines: LogLine[], text: string) =>
      d.realLogs ? lines.some((l) => l.line.includes(text)) : lines.length > 0;

    test('logs: the newest `tail` lines of what runs, each stamped; follow streams new lines until aborted', async () => {
      const id = randomUUID();
      const text = `contract-log-${id.slice(0, 8)}`;
      await d.provider.apply(desired(id, 1, { service: specOf(id, d.printEvery(text)) }), never);
      const lines = await linesOf(id, 3, (all) => all.length >= 2 && printed(all, text));
      assert.ok(lines.length <= 3, `at most tail (3) lines, got ${lines.length}`);
      for (const line of lines) {
        assert.equal(new Date(line.time).toISOString(), line.time, 'ISO 8601 UTC with milliseconds');
        assert.ok(line.replica.length > 0);
        assert.ok(line.stream === 'stdout' || line.stream === 'stderr');
      }
      const times = lines.map((l) => l.time);
      assert.deepEqual(times, times.toSorted(), 'oldest first');

      // `since` leaves out what was printed before it (the newest line's time: it and later ones only).
      const since = new Date(times.at(-1) ?? '');
      const ref = desired(id, 0).service;
      const later: LogLine[] = [];
      for await (const line of d.provider.logs.read(ref, { since, tail: 1000, follow: false, signal: never }))
        later.push(line);
      assert.ok(later.length > 0, 'the line at `since` itself is shown');
      assert.ok(
        later.every((l) => new Date(l.time) >= since),
        `nothing before ${since.toISOString()}: ${later.map((l) => l.time).join(', ')}`,
      );

      const followFrom = new Date();
      const stop = new AbortController();
      const followed: LogLine[] = [];
      const reading = (async () => {
        for await (const line of d.provider.logs.read(ref, { tail: 1, follow: true, signal: stop.signal })) {
          followed.push(line);
          if (new Date(line.time) >= followFrom) stop.abort();
        }
      })();
      try {
        await pollUntil('a line printed after the follow began', async () =>
          followed.some((l) => new Date(l.time) >= followFrom) ? true : undefined,
        );
      } finally {
        stop.abort();
        await reading;
      }
      const before = followed.filter((l) => new Date(l.time) < followFrom);
      assert.ok(before.length <= 1, `tail 1: at most one line printed before the call, got ${before.length}`);
    });

    test('a job runs to its end: apply resolves once it completed, and what it printed is in its logs', async () => {
      const id = randomUUID();
      const text = `contract-job-${id.slice(0, 8)}`;
      await d.provider.apply(
        desired(id, 70, { service: specOf(id, { ...d.printOnce(text), type: 'job' }) }),
        never,
      );
      const ref = { ...desired(id, 0).service, type: 'job' as const };
      assert.deepEqual(await d.provider.observe(ref), {
        run_status: 'completed',
        ready_count: 0,
        generation: 70,
      });
      await linesOf(id, 10, (lines) => printed(lines, text));
    });

    test('cron: a cron service is scheduled, its runs print into its logs, and remove stops it', async () => {
      const id = randomUUID();
      const text = `contract-cron-${id.slice(0, 8)}`;
      const service = specOf(id, { ...d.printOnce(text), type: 'cron', cron_schedule: '* * * * * *' });
      await d.provider.apply(desired(id, 80, { service }), never);
      const ref = { ...desired(id, 0).service, type: 'cron' as const };
      assert.deepEqual(await d.provider.observe(ref), {
        run_status: 'scheduled',
        ready_count: 0,
        generation: 80,
      });
      // A second cron service keeps running: two of its runs after the remove show that the schedule
      // ticked twice, so a run of the removed one would have started by then.
      const other = randomUUID();
      const otherText = `contract-cron-${other.slice(0, 8)}`;
      const otherService = specOf(other, {
        ...d.printOnce(otherText),
        type: 'cron',
        cron_schedule: '* * * * * *',
      });
      await d.provider.apply(desired(other, 80, { service: otherService }), never);
      // Removed however the test ends, so that a failure leaves no schedule running.
      try {
        await linesOf(id, 10, (lines) => printed(lines, text));

        await d.provider.remove(ref);
        const removedAt = new Date();
        assert.equal((await d.provider.observe(ref)).run_status, 'deleted');
        const runsSince = (lines: LogLine[]) =>
          lines.filter((l) => new Date(l.time) >= removedAt && (!d.realLogs || l.line.includes(otherText)));
        await linesOf(other, 1000, (lines) => runsSince(lines).length >= 2);
        const afterwards = await linesOf(id, 1000, () => true);
        assert.deepEqual(
          afterwards.filter((l) => new Date(l.time) >= removedAt),
          [],
          'no run of the removed service started',
        );
      } finally {
        await d.provider.remove(ref);
        await d.provider.remove({ ...desired(other, 0).service, type: 'cron' });
      }
    });

    test('cancel: a rollout the user cancelled stops, leaves nothing of its own, and the previous version runs', async () => {
      const id = randomUUID();
      await d.provider.apply(desired(id, 90), never);
      const running = await d.fingerprint(id);
      const cancel = new AbortController();
      // Cancelled once the rollout is under way (its image resolved), as a user's cancel comes.
      const log: DeployLog = {
        ...SILENT_LOG,
        mark: (mark) => {
          if (mark === 'image_resolved') cancel.abort(new DeploymentCancelled());
        },
      };
      await assert.rejects(d.provider.apply(desired(id, 91), cancel.signal, log), DeploymentCancelled);
      assert.ok(cancel.signal.aborted, 'the cancel came during the rollout');
      assert.equal(await d.fingerprint(id), running, 'what the cancelled rollout started is gone');
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 90);
      await d.provider.apply(desired(id, 92), never);
      assert.equal((await d.provider.observe(desired(id, 0).service)).generation, 92, 'the next one goes on');
    });

    test('resources: made at most once, the same value again returns the same; deleted (twice is harmless), then made anew; a refusal names it and makes nothing', async () => {
      const { resources } = d.provider;
      const declared = d.resources;
      if (!resources || !declared) {
        assert.equal(d.capabilities.includes('resources'), false, 'a driver without resources declares none');
        return;
      }
      const service = desired(randomUUID(), 0).service;
      const request = {
        service,
        environment: d.environment,
        resource: declared.makes,
        password: 'contract-pass-1',
      };
      const what = () => declared.fingerprint(service.id, declared.makes);
      assert.equal(await what(), '', 'nothing before the first ensure');
      const made = await resources.ensure(request, never);
      assert.ok(Object.keys(made.attributes).length > 0, 'its attributes resolve exports');
      const first = await what();
      assert.notEqual(first, '', 'ensure made it');
      assert.deepEqual(await resources.ensure(request, never), made, 'the same value changes nothing');
      assert.equal(await what(), first, 'made once, not twice');

      await resources.delete(service, declared.makes);
      assert.equal(await what(), '', 'delete removed it');
      await resources.delete(service, declared.makes);
      await resources.ensure(request, never);
      const again = await what();
      assert.ok(again !== '' && again !== first, 'a deleted dependency is made anew by the next ensure');
      await resources.delete(service, declared.makes);

      const refused = declared.refuses;
      await assert.rejects(
        resources.ensure({ ...request, resource: refused }, never),
        (error: Error) => error instanceof TerminalError && error.message.includes(refused.kind),
      );
      assert.equal(await declared.fingerprint(service.id, refused), '', 'a refusal makes nothing');
    });

    test('backups: a dump of a made dependency, each its own, restored into it and into a copy; discarding twice is harmless, and so is releasing a service no restore holds', async () => {
      const { backups, resources } = d.provider;
      if (!backups || !resources || !d.resources) {
        assert.equal(d.capabilities.includes('backups'), false, 'a driver without backups declares none');
        return;
      }
      const service = desired(randomUUID(), 0).service;
      const resource = d.resources.makes;
      const given = 'contract-pass-2';
      const made = await resources.ensure(
        { service, environment: d.environment, resource, password: given },
        never,
      );
      // The password Berth keeps: the one the driver made it with, else the one Berth gave.
      const request = {
        service,
        environment: d.environment,
        resource,
        backupId: randomUUID(),
        password: made.password ?? given,
      };
      try {
        const first = await backups.backup(request, never);
        assert.ok(first.location.length > 0, 'where it is');
        assert.ok(first.sizeBytes > 0, `its size, got ${first.sizeBytes}`);
        const second = await backups.backup({ ...request, backupId: randomUUID() }, never);
        assert.notEqual(second.location, first.location, 'each backup is a file of its own');

        const restore = { ...request, location: first.location, stop: [] };
        const copy = await backups.restore({ ...restore, into: 'new' }, never);
        assert.ok(copy.attributes && Object.keys(copy.attributes).length > 0, "the copy's attributes");
        assert.notDeepEqual(copy.attributes, made.attributes, 'the copy is not the dependency');
        assert.deepEqual(
          await backups.restore({ ...restore, into: 'same' }, never),
          {},
          'into the dependency',
        );

        await backups.discard(d.environment, first.location);
        await backups.discard(d.environment, first.location);
        await backups.discard(d.environment, second.location);
        // The drivers' unit tests hold a service and release it; here: nothing held, nothing ever run.
        await backups.release(d.environment, [service]);
      } finally {
        await resources.delete(service, resource);
      }
    });

    test('sources: the text of a file at the branch head, with its commit; null where there is no file; a path out of the repository is a TerminalError', async () => {
      const { sources } = d.provider;
      if (!sources || !d.repository) {
        assert.equal(d.capabilities.includes('sources'), false, 'a driver without sources declares none');
        return;
      }
      const id = randomUUID();
      const text = JSON.stringify({ contract: id });
      const repository = await d.repository({ 'ops.json': text, 'deploy/inner.json': 'inner' });
      const service = specOf(id, { ...repository, source: 'github', docker_image: null });
      const read = (path: string) =>
        sources.readFile(
          {
            service,
            target: { commit_id: '', docker_image_tag: '', helm_chart_version: '' },
            deploymentId: randomUUID(),
            path,
          },
          never,
        );
      const found = await read('ops.json');
      assert.equal(found.text, text);
      assert.ok(found.commit.length > 0, 'the commit it was read at');
      assert.equal((await read('./deploy/inner.json')).text, 'inner', 'a relative path in a directory');
      assert.equal((await read('missing.json')).text, null);
      for (const outside of ['../outside.json', 'deploy/../../outside.json', '/etc/passwd'])
        await assert.rejects(read(outside), TerminalError, outside);
    });

    test('admission: the contract service is admitted; a service the driver can never run is refused with a reason', async () => {
      const { admission } = d.provider;
      if (!admission || !d.refused) {
        assert.equal(d.capabilities.includes('admission'), false, 'a driver without admission declares none');
        return;
      }
      const id = randomUUID();
      assert.equal(admission.refusal(specOf(id, {})), null);
      const reason = admission.refusal(specOf(id, d.refused));
      assert.ok(reason && reason.length > 0, 'refused, saying why');
    });
  });
}

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import {
  DeployFailed,
  type DesiredService,
  type Provider,
  type RuntimeSpec,
} from '../../src/providers/provider.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { swarmTables } from '../../src/providers/swarm/tables.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { freePort } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { Servers } from '../helpers/server.ts';
import { deploymentOf, SWARM_IMAGE, startSwarm, type TestSwarm } from '../helpers/swarm.ts';

/**
 * Jobs and cron services on a real swarm: a job is a replicated-job service whose exit code is the
 * deployment's outcome; a cron service's ticks run once each even with two Berth processes scheduling it.
 */
let swarm: TestSwarm;
// The driver in this process, twice on one database (two schedulers): the shared set-up's database.
let servers: Servers | undefined;
let store: Store;
const providers: Provider[] = [];
/** What the schedulers logged at warn and above: a tick started twice would show here. */
const warnings: string[] = [];
const environment = { id: randomUUID(), account_id: randomUUID(), cloud: 'aws' as const, region: 'local' };
const never = new AbortController().signal;

async function open(): Promise<Provider> {
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk, _encoding, done) {
        warnings.push(String(chunk));
        done();
      },
    }),
  );
  const config = {
    ...loadConfig({}),
    provider: 'swarm',
    providerEnv: {
      DOCKER_HOST: swarm.dockerHost,
      BERTH_SWARM_MONITOR_S: '1',
      BERTH_INGRESS_PORT: String(await freePort()),
    },
  };
  const provider = await openProvider(config, store.db, logger);
  providers.push(provider);
  return provider;
}

before(async () => {
  swarm = await startSwarm(2);
  servers = await Servers.open('swarm', {});
  const { databaseUrl, dataDir } = servers.database;
  store = await openStore({ databaseUrl, dataDir });
});
after(async () => {
  for (const provider of providers) await provider.close();
  await store?.close();
  await servers?.close();
  await swarm?.down();
});

function desired(spec: Partial<RuntimeSpec>, generation = 1): DesiredService {
  return deploymentOf(environment, spec.id ?? randomUUID(), `${swarm.registry}/${SWARM_IMAGE}:latest`, {
    generation,
    spec,
    variables: { GREETING: 'hello' },
  });
}

test('a job runs once on the swarm: exit 0 succeeds, any other code fails the deployment with it', async () => {
  const provider = await open();
  await provider.ensureEnvironment(environment);
  const ok = desired({ type: 'job', run_command: 'echo "$GREETING from a job"' });
  await provider.apply(ok, never);
  assert.deepEqual(await provider.observe(ok.service), {
    run_status: 'completed',
    ready_count: 0,
    generation: 1,
  });
  // The same deployment again (a rerun after a crash) reports the same outcome and runs nothing new.
  await provider.apply(ok, never);
  const runs = await swarm.manager.listServices({ filters: { label: [`berth.service=${ok.service.id}`] } });
  assert.equal(runs.length, 1);

  const bad = desired({ type: 'job', run_command: 'exit 3' });
  await assert.rejects(provider.apply(bad, never), (error: Error) => {
    assert.ok(error instanceof DeployFailed);
    assert.match(error.message, /exited with code 3/);
    return true;
  });
  assert.equal((await provider.observe(bad.service)).run_status, 'failed');
});

test('a cron tick runs once even with two Berth processes scheduling it', async () => {
  const first = await open();
  const second = await open();
  await first.serving?.start();
  await second.serving?.start();
  const cron = desired({ type: 'cron', cron_schedule: '*/2 * * * * *', run_command: 'echo tick' });
  await first.apply(cron, never);
  assert.equal((await second.observe(cron.service)).run_status, 'scheduled');
  const ticks = swarmTables(store.db);
  await pollUntil(
    'three ticks to run',
    async () => {
      const claimed = await ticks
        .selectFrom('docker_cron_ticks')
        .select('tick_at')
        .where('service_id', '=', cron.service.id)
        .execute();
      return claimed.length >= 3 ? claimed : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  // Runs beyond the last three are removed as new ones start: each look lists them afresh.
  const completed = await pollUntil('a run to complete', async () => {
    const runs = await swarm.manager.listServices({
      filters: { label: [`berth.service=${cron.service.id}`, 'berth.role=cron-run'] },
    });
    for (const run of runs) {
      const tasks = await swarm.manager.listTasks({ filters: { service: [run.ID] } }).catch(() => []);
      if (tasks.some((t: { Status: { State: string } }) => t.Status.State === 'complete')) return run;
    }
    return undefined;
  });
  assert.ok(completed);
  // Both schedulers fire every tick; one claims it, the other stands aside: no second start collided.
  assert.deepEqual(
    warnings.filter((w) => w.includes('cron run failed to start')),
    [],
  );
  await first.remove(cron.service);
  assert.equal((await second.observe(cron.service)).run_status, 'deleted');
  const left = await swarm.manager.listServices({ filters: { label: [`berth.service=${cron.service.id}`] } });
  assert.deepEqual(left, []);
});

test('a cron run that outlasts its schedule is the only one: ticks meanwhile are skipped, and no run is removed while it runs', async () => {
  const provider = providers[0] ?? (await open());
  await provider.serving?.start();
  const cron = desired({ type: 'cron', cron_schedule: '* * * * * *', run_command: 'sleep 3600' });
  await provider.apply(cron, never);
  const runsOf = () =>
    swarm.manager.listServices({
      filters: { label: [`berth.service=${cron.service.id}`, 'berth.role=cron-run'] },
    });
  try {
    const first = await pollUntil('a run to start', async () => (await runsOf())[0]);
    // Ticks claimed after the run exists were each a chance to start a second run or remove this one.
    const ticks = swarmTables(store.db);
    await pollUntil(
      'three more ticks to be claimed',
      async () => {
        const claimed = await ticks
          .selectFrom('docker_cron_ticks')
          .select('tick_at')
          .where('service_id', '=', cron.service.id)
          .where('tick_at', '>', new Date(String(first.CreatedAt)))
          .execute();
        return claimed.length >= 3 ? claimed : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    assert.deepEqual(
      (await runsOf()).map((r) => r.ID),
      [first.ID],
    );
  } finally {
    await provider.remove(cron.service);
  }
});

test('prov_node_group_id places every replica on the nodes labelled with it; reservations and limits follow the service', async () => {
  const provider = providers[0] ?? (await open());
  const group = randomUUID();
  const nodes = await swarm.manager.listNodes();
  const worker = nodes.find((n: { ManagerStatus?: unknown }) => !n.ManagerStatus);
  assert.ok(worker, 'the swarm has a worker node');
  await swarm.manager
    .getNode(worker.ID)
    .update({ version: worker.Version.Index, ...worker.Spec, Labels: { 'berth.node_group': group } });
  const placed = desired({
    type: 'worker',
    replica_count: 2,
    run_command: 'sleep 3600',
    prov_node_group_id: group,
    cpu_count_min: 0.1,
    cpu_count_max: 0.5,
    memory_mb_min: 16,
    memory_mb_max: 64,
  });
  await provider.apply(placed, never);
  const tasks = await swarm.manager.listTasks({
    filters: { service: [`berth-${placed.service.id}`], 'desired-state': ['running'] },
  });
  assert.deepEqual(
    tasks.map((t: { NodeID: string }) => t.NodeID),
    [worker.ID, worker.ID],
  );
  const spec = (await swarm.manager.getService(`berth-${placed.service.id}`).inspect()).Spec.TaskTemplate;
  assert.deepEqual(spec.Placement.Constraints, [`node.labels.berth.node_group==${group}`]);
  assert.deepEqual(spec.Resources, {
    Reservations: { NanoCPUs: 100_000_000, MemoryBytes: 16 * 1024 * 1024 },
    Limits: { NanoCPUs: 500_000_000, MemoryBytes: 64 * 1024 * 1024 },
  });
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { DEFAULT_OPS_CONFIG } from '../../src/domain/ops-json.ts';
import type { DesiredService, Provider } from '../../src/providers/provider.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import { BASE_IMAGE, containersOfService, docker } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { serviceSpecIn } from '../helpers/provider-contract.ts';
import { Servers } from '../helpers/server.ts';

/**
 * Issue 17: a worker that loses its job's lease while its rollout waits (for health checks, for a job
 * to end) stops at once, before any further side effect: it neither waits out the deploy timeout nor
 * removes the replicas (the worker that took the job over may be using them), moves traffic or retires
 * the version in place.
 */
// The driver in this process, no `berth serve`: the shared set-up's database, ingress port and clean-up.
let servers: Servers | undefined;
let store: Store;
let provider: Provider;
const environment = { id: randomUUID(), account_id: randomUUID(), cloud: 'aws' as const, region: 'local' };

before(async () => {
  servers = await Servers.open('docker', {});
  servers.own(environment.id);
  const { databaseUrl, dataDir } = servers.database;
  store = await openStore({ databaseUrl, dataDir });
  const providerEnv = { BERTH_INGRESS_PORT: String(servers.ingressPort) };
  provider = await openProvider(
    { ...loadConfig({}), provider: 'docker', providerEnv },
    store.db,
    pino({ level: 'silent' }),
  );
  await provider.ensureEnvironment(environment);
});
after(async () => {
  await provider?.close();
  await store?.close();
  await servers?.close();
});

const SERVING = 'mkdir -p /www && echo v1 > /www/index.html && exec httpd -f -p 8080 -h /www';
/** Runs, but never listens on its port, so it never becomes ready. */
const NEVER_READY = 'exec sleep 3600';

function desired(
  serviceId: string,
  type: 'web' | 'job',
  generation: number,
  runCommand: string,
): DesiredService {
  const service = serviceSpecIn(environment, serviceId, {
    type,
    port: type === 'web' ? 8080 : null,
    docker_image: BASE_IMAGE.replace(/:latest$/, ''),
    run_command: runCommand,
  });
  return {
    service,
    environment,
    deploymentId: randomUUID(),
    generation,
    target: { commit_id: '', docker_image_tag: 'latest', helm_chart_version: '' },
    // The deploy timeout is many minutes: only the abort can end these waits within the test.
    ops: { ...DEFAULT_OPS_CONFIG, deploy_timeout: 30 },
    variables: {},
    domains: [],
  };
}

/** Applies `want`, aborting once its container runs; resolves with how the apply ended. */
async function abortWhileWaiting(want: DesiredService): Promise<unknown> {
  const lease = new AbortController();
  let outcome: unknown;
  provider.apply(want, lease.signal).then(
    () => {
      outcome = 'applied';
    },
    (error: unknown) => {
      outcome = error;
    },
  );
  await pollUntil('the new container to run', async () => {
    const running = await containersOfService(want.service.id, false);
    return running.some((c) => c.Labels['berth.deployment'] === want.deploymentId) ? true : undefined;
  });
  assert.equal(outcome, undefined, 'the apply is still waiting when the lease is lost');
  lease.abort(new Error('the lease of this job was lost'));
  // Generous, and far below the 30-minute deploy timeout the old wait would have run into.
  return pollUntil('the aborted apply to end', async () => outcome, { timeoutMs: 30_000 });
}

test('a rollout waiting for its replicas to become healthy stops when its lease is lost, and changes nothing', async () => {
  const id = randomUUID();
  const never = new AbortController().signal;
  await provider.apply(desired(id, 'web', 1, SERVING), never);
  const stale = desired(id, 'web', 2, NEVER_READY);
  const outcome = await abortWhileWaiting(stale);
  assert.match(String(outcome), /lease of this job was lost/);

  assert.equal((await provider.observe(stale.service)).generation, 1, 'the version in place keeps serving');
  const [replica] = (await containersOfService(id, false)).filter(
    (c) => c.Labels['berth.deployment'] === stale.deploymentId,
  );
  assert.ok(replica, 'the replica is left to whoever runs the deployment now');
  const policy = (await docker.getContainer(replica.Id).inspect()).HostConfig.RestartPolicy?.Name ?? '';
  assert.ok(['', 'no'].includes(policy), `restart policy ${policy}: the rollout went on after the abort`);
  assert.equal(
    (await containersOfService(id, false)).filter((c) => c.Labels['berth.generation'] === '1').length,
    1,
    'the old version is not retired',
  );
});

test('a job deployment waiting for its container to end stops when its lease is lost, and changes nothing', async () => {
  const id = randomUUID();
  const stale = desired(id, 'job', 1, NEVER_READY);
  const outcome = await abortWhileWaiting(stale);
  assert.match(String(outcome), /lease of this job was lost/);
  assert.equal((await provider.observe(stale.service)).generation, null, 'nothing was promoted');
});

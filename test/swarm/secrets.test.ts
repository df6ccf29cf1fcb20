import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { TerminalError } from '../../src/jobs/errors.ts';
import type { DesiredService, EnvironmentRef, Provider, RuntimeSpec } from '../../src/providers/provider.ts';
import { pollUntil } from '../helpers/poll.ts';
import {
  deploymentOf,
  openSwarmSuite,
  type SwarmSuite,
  serviceOutput,
  type TestSwarm,
} from '../helpers/swarm.ts';

/**
 * A service's variables on the swarm: its process sees them, and they never lie in plain text on a node
 * (not in any engine's inspect output, not in any file under a node's data root); each version has its
 * own swarm secret, removed once nothing runs that version; an image without a shell cannot take
 * variables and is refused with that reason.
 */
const run = promisify(execFile);
let suite: SwarmSuite | undefined;
let swarm: TestSwarm;
let provider: Provider;
let echo: string;
let shellless: string;
let environment: EnvironmentRef;
const never = new AbortController().signal;

/** A value no file could hold by chance, with what a shell would otherwise take apart. */
const secretValue = () => `s3cr3t-${randomBytes(12).toString('hex')}-'quoted' $HOME \`id\``;
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

before(async () => {
  suite = await openSwarmSuite(
    2,
    async (swarm) => {
      // Prints the hash of $TOKEN (never the value: logs are files on the node) and its own arguments.
      echo = await swarm.pushImage(
        'berth-swarm/env-echo',
        'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' +
          'ENTRYPOINT ["/bin/sh", "-c", "echo \\"token $(printf %s \\"$TOKEN\\" | sha256sum | cut -d\\" \\" -f1) args $0 $1\\"; exec sleep 3600"]\n' +
          'CMD ["first", "second"]\n',
      );
      shellless = await swarm.pushImage(
        'berth-swarm/no-shell',
        'FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT ["/bin/busybox"]\nCMD ["sleep", "3600"]\n',
      );
      return {};
    },
    { serving: true },
  );
  ({ swarm, provider, environment } = suite);
});
after(() => suite?.close());

function desired(
  image: string,
  serviceId: string,
  generation: number,
  spec: Partial<RuntimeSpec>,
  variables: Record<string, string>,
): DesiredService {
  return deploymentOf(environment, serviceId, image, { generation, spec, variables });
}

const output = (name: string) => serviceOutput(swarm.manager, name);

async function secretsOf(serviceId: string): Promise<string[]> {
  const secrets = await swarm.manager.listSecrets({ filters: { label: [`berth.service=${serviceId}`] } });
  return secrets.map((s) => s.Spec?.Name ?? '').sort();
}

/** Everything each node's engine tells of its containers, and the manager of the service and its tasks. */
async function inspected(serviceName: string): Promise<string> {
  const parts: unknown[] = [
    await swarm.manager.getService(serviceName).inspect(),
    await swarm.manager.listTasks({ filters: { service: [serviceName] } }),
  ];
  for (const n of [1, 2]) {
    const node = swarm.node(n);
    for (const c of await node.listContainers({ all: true }))
      parts.push(await node.getContainer(c.Id).inspect());
  }
  return JSON.stringify(parts);
}

/** The files under the nodes' data roots holding `value`: none but what lies on a tmpfs (-xdev). */
async function filesHolding(value: string): Promise<string[]> {
  const { stdout } = await run(
    'bash',
    ['-c', 'find "$ROOT" -xdev -type f -print0 | xargs -0 -r grep -lF -e "$VALUE" || true'],
    { env: { ...process.env, ROOT: swarm.dataRoot, VALUE: value }, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout.split('\n').filter(Boolean);
}

test('variables reach the process through a swarm secret and lie in plain text nowhere on a node', async () => {
  const serviceId = randomUUID();
  const token = secretValue();
  const first = desired(echo, serviceId, 1, { type: 'worker', replica_count: 2 }, { TOKEN: token });
  await provider.apply(first, never);
  const name = `berth-${serviceId}`;
  // Both replicas (one per node) ran the image's own ENTRYPOINT and CMD, with the variable set.
  const seen = await pollUntil('both replicas to print what they see', async () => {
    const lines = (await output(name)).split('\n').filter((l) => l.startsWith('token '));
    return lines.length === 2 ? lines : undefined;
  });
  assert.deepEqual(seen, [
    `token ${sha256(token)} args first second`,
    `token ${sha256(token)} args first second`,
  ]);
  const spec = (await swarm.manager.getService(name).inspect()).Spec.TaskTemplate.ContainerSpec;
  assert.equal(spec.Env, undefined, 'no variable in the container environment');
  assert.deepEqual(
    spec.Secrets.map((s: { SecretName: string }) => s.SecretName),
    [`berth-env-${first.deploymentId}`],
  );
  const dump = await inspected(name);
  assert.ok(dump.includes(first.deploymentId), 'the inspect output is the service');
  assert.ok(!dump.includes(token), 'no engine shows the value');
  assert.ok(!dump.includes(token.slice(0, 31)), 'nor its start');
  // The search does read what the nodes keep: the deployment's id is in their containers' configs.
  assert.notDeepEqual(await filesHolding(first.deploymentId), [], 'the nodes keep their containers on disk');
  assert.deepEqual(await filesHolding(token.slice(0, 31)), [], 'no file on any node holds the value');
});

test('each version has its own secret; a secret goes once no version uses it, all of them with the service', async () => {
  const serviceId = randomUUID();
  const name = `berth-${serviceId}`;
  const tokens = [secretValue(), secretValue(), secretValue()];
  const versions = tokens.map((token, i) =>
    desired(echo, serviceId, i + 1, { type: 'worker', replica_count: 1 }, { TOKEN: token }),
  );
  for (const [i, version] of versions.entries()) {
    await provider.apply(version, never);
    await pollUntil(`version ${i + 1} to see its own value`, async () =>
      (await output(name)).includes(`token ${sha256(tokens[i] ?? '')}`) ? true : undefined,
    );
  }
  // The version in place and the one a rollback would return to.
  assert.deepEqual(
    await secretsOf(serviceId),
    [`berth-env-${versions[1]?.deploymentId}`, `berth-env-${versions[2]?.deploymentId}`].sort(),
  );

  // A job and a cron service get theirs the same way (a cron run copies its template's secret).
  const jobId = randomUUID();
  const jobToken = secretValue();
  const job = desired(
    echo,
    jobId,
    1,
    { type: 'job', run_command: 'echo "job $(printf %s "$TOKEN" | sha256sum)"' },
    { TOKEN: jobToken },
  );
  await provider.apply(job, never);
  assert.match(await output(`berth-job-${job.deploymentId}`), new RegExp(`job ${sha256(jobToken)}`));
  const cronId = randomUUID();
  const cronToken = secretValue();
  const cron = desired(
    echo,
    cronId,
    1,
    {
      type: 'cron',
      cron_schedule: '*/2 * * * * *',
      run_command: 'echo "cron $(printf %s "$TOKEN" | sha256sum)"',
    },
    { TOKEN: cronToken },
  );
  await provider.apply(cron, never);
  await pollUntil(
    'a cron run to print what it sees',
    async () => {
      const runs = await swarm.manager.listServices({
        filters: { label: [`berth.service=${cronId}`, 'berth.role=cron-run'] },
      });
      for (const r of runs) {
        const text = await output(r.ID).catch(() => '');
        if (text.includes(`cron ${sha256(cronToken)}`)) return true;
      }
      return undefined;
    },
    { timeoutMs: 60_000 },
  );

  for (const id of [serviceId, jobId, cronId]) {
    await provider.remove(desired(echo, id, 1, { type: 'worker' }, {}).service);
    assert.deepEqual(await secretsOf(id), [], 'no secret of a deleted service is left');
  }
});

test("a shell health check sees the variables as the service's process does", async () => {
  const serviceId = randomUUID();
  const checked = desired(echo, serviceId, 1, { type: 'worker' }, { TOKEN: secretValue() });
  // Healthy only with TOKEN set: without the variables the swarm would roll the first version back.
  checked.ops = { ...checked.ops, health_check: { type: 'shell', command: 'test -n "$TOKEN"', timeout: 2 } };
  await provider.apply(checked, never);
  assert.deepEqual(await provider.observe(checked.service), {
    run_status: 'running',
    ready_count: 1,
    generation: 1,
  });
  // And the probe of the image's shell left no container on the manager.
  assert.deepEqual(
    await swarm.manager.listContainers({ all: true, filters: { name: ['berth-probe-'] } }),
    [],
  );
});

test('an image without a shell cannot take variables: refused with that reason; without variables it runs', async () => {
  const serviceId = randomUUID();
  const refused = desired(shellless, serviceId, 1, { type: 'worker' }, { TOKEN: secretValue() });
  await assert.rejects(provider.apply(refused, never), (error: Error) => {
    assert.ok(error instanceof TerminalError, `a TerminalError, got ${error.constructor.name}`);
    assert.match(error.message, /has no \/bin\/sh: .*swarm secret/);
    return true;
  });
  assert.deepEqual(await secretsOf(serviceId), []);
  const plain = desired(shellless, serviceId, 2, { type: 'worker' }, {});
  await provider.apply(plain, never);
  assert.equal((await provider.observe(plain.service)).run_status, 'running');
});

import assert from 'node:assert/strict';
import { pollUntil } from './poll.ts';
import { api, type BerthProcess, deploymentEnd } from './process.ts';

/**
 * A cron service ticking every two seconds (`echo tick`) from `image`, created and deployed through the
 * API of `berth` (the `envUrl`, `token` of its first start): its id once the deployment succeeded.
 */
export async function deployTicker(
  berth: { url: string },
  { envUrl, token }: { envUrl: string; token: string },
  image: { docker_image: string; docker_registry?: string },
): Promise<string> {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Ticker',
    source: 'docker_image',
    ...image,
    type: 'cron',
    cron_schedule: '*/2 * * * * *',
    run_command: 'echo tick',
    replica_count: 1,
    cpu_count_min: 0.1,
    memory_mb_min: 16,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const id = created.body.data.service.id as string;
  const deploy = await api(`${envUrl}/services/${id}/deploy`, token, 'POST', {});
  const end = await deploymentEnd(berth.url, token, deploy.body.data.deployment_id, 300_000);
  assert.equal(end.state, 'success', end.failure_reason);
  return id;
}

/**
 * Per process, the ticks of a cron service it ran and the ones it found claimed by another (its log at
 * level debug, which says both).
 */
function ticksOf(proc: BerthProcess, serviceId: string): { ran: string[]; skipped: string[] } {
  const ran: string[] = [];
  const skipped: string[] = [];
  for (const line of proc.stdout().split('\n')) {
    if (!line.includes(serviceId) || !line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { msg: string; tick: string };
    if (entry.msg === 'cron run started') ran.push(entry.tick);
    if (entry.msg === 'cron tick claimed by another Berth process') skipped.push(entry.tick);
  }
  return { ran, skipped };
}

/**
 * Two `berth serve` processes on one database both schedule the cron service: waits until each has
 * found ticks taken that the other ran, then asserts that no tick ran twice and no run failed to start.
 */
export async function assertEachTickRunOnce(
  first: BerthProcess,
  second: BerthProcess,
  serviceId: string,
): Promise<void> {
  await pollUntil(
    'both processes to have run ticks the other found taken',
    async () => {
      const [a, b] = [ticksOf(first, serviceId), ticksOf(second, serviceId)];
      const all = a.ran.length + b.ran.length;
      return all >= 6 && a.skipped.length + b.skipped.length >= 3 ? true : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  // A tick one process found taken was run by the other (which says so once its run is created).
  const seen = [ticksOf(first, serviceId), ticksOf(second, serviceId)];
  await pollUntil('every tick found taken to have been run by the other process', async () => {
    const [a, b] = [ticksOf(first, serviceId), ticksOf(second, serviceId)];
    const missing = [
      ...(seen[0]?.skipped.filter((t) => !b.ran.includes(t)) ?? []),
      ...(seen[1]?.skipped.filter((t) => !a.ran.includes(t)) ?? []),
    ];
    return missing.length === 0 ? true : undefined;
  });
  const ran = [...ticksOf(first, serviceId).ran, ...ticksOf(second, serviceId).ran];
  assert.equal(new Set(ran).size, ran.length, `a tick ran twice: ${ran.sort().join(', ')}`);
  for (const proc of [first, second]) assert.doesNotMatch(proc.stdout(), /cron run failed to start/);
}

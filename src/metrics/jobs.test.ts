import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { JobClaim, JobHandler, JobHandlers } from '../jobs/worker.ts';
import type { JobRow } from '../store/schema.ts';
import { instrumentJobs } from './jobs.ts';
import { Metrics } from './metrics.ts';

async function value(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = await metrics.registry.getSingleMetric(name.replace(/_count$/, ''))?.get();
  const values = (metric?.values ?? []) as { metricName?: string; labels: object; value: number }[];
  const series = values.find(
    (v) =>
      (v.metricName ?? name) === name &&
      Object.entries(labels).every(([k, l]) => String((v.labels as Record<string, unknown>)[k]) === l),
  );
  return series?.value ?? 0;
}

test('a job run is a claim, a retry when it ran before, timed by outcome; a final failure is counted', async () => {
  const metrics = new Metrics('sim');
  let running = -1;
  const failing: JobHandler = {
    run: async () => {
      running = await value(metrics, 'berth_jobs_running', { kind: 'deploy' });
      throw new Error('the provider is down');
    },
    fail: async () => undefined,
    retryDelayMs: () => 5,
  };
  const handlers = instrumentJobs({ deploy: failing } as unknown as JobHandlers, metrics);
  const job = { attempts: 2 } as JobRow;
  const claim = {} as JobClaim;
  await assert.rejects(handlers.deploy.run(job, new AbortController().signal, claim), /the provider is down/);
  await handlers.deploy.fail(job, 'the provider is down', claim);
  assert.equal(running, 1, 'counted as running while it runs');
  assert.equal(await value(metrics, 'berth_jobs_running', { kind: 'deploy' }), 0);
  assert.equal(await value(metrics, 'berth_jobs_claimed_total', { kind: 'deploy' }), 1);
  assert.equal(await value(metrics, 'berth_jobs_retried_total', { kind: 'deploy' }), 1);
  assert.equal(await value(metrics, 'berth_jobs_failed_total', { kind: 'deploy' }), 1);
  assert.equal(
    await value(metrics, 'berth_job_duration_seconds_count', { kind: 'deploy', outcome: 'error' }),
    1,
  );
  // What the wrapper does not count passes through untouched.
  assert.equal(handlers.deploy.retryDelayMs?.(3), 5);
});

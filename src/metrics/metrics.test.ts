import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JOB_KINDS } from '../store/repositories/jobs.ts';
import { Metrics } from './metrics.ts';

test('failure counters are exported at 0 before their first failure, so increase() > 0 alerts on the first one', async () => {
  const text = await new Metrics('sim').registry.metrics();
  for (const series of [
    'berth_backups_total{outcome="failed"} 0',
    'berth_backups_total{outcome="written"} 0',
    'berth_auth_failures_total{surface="api"} 0',
    'berth_auth_failures_total{surface="hooks"} 0',
    'berth_refusals_total{reason="rate_limit"} 0',
    'berth_refusals_total{reason="auth_failures"} 0',
    ...JOB_KINDS.flatMap((kind) =>
      ['claimed', 'retried', 'failed'].map((what) => `berth_jobs_${what}_total{kind="${kind}"} 0`),
    ),
  ]) {
    assert.ok(text.split('\n').includes(series), `missing ${series}`);
  }
});

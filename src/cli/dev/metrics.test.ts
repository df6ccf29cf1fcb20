import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ServiceMetrics } from '../../client/index.ts';
import { render } from './metrics.ts';

const MiB = 1024 * 1024;
const from = Date.parse('2026-01-01T12:00:00.000Z');

function series(): ServiceMetrics {
  const points = Array.from({ length: 60 }, (_, i) => ({
    time: new Date(from + i * 60_000).toISOString(),
    samples: 1,
    cpu_cores: i === 59 ? 0.5 : 0.1 + i / 100,
    memory_bytes: (100 + i) * MiB,
    memory_limit_bytes: 512 * MiB,
    restarts: 0,
    network_rx_bytes: 0,
    network_tx_bytes: 0,
    requests: 100 + i,
    status_2xx: 100 + i - (i % 10 === 0 ? 5 : 0),
    status_3xx: 0,
    status_4xx: 0,
    status_5xx: i % 10 === 0 ? 5 : 0,
    latency_p50_ms: 10,
    latency_p95_ms: 20,
    latency_p99_ms: 30,
  }));
  // A step without samples: a gap, drawn as 0.
  points.splice(20, 1);
  return {
    from: new Date(from).toISOString(),
    to: new Date(from + 3_600_000).toISOString(),
    step: 60,
    points,
    deployments: [
      {
        id: '11111111-1111-4111-8111-111111111111',
        type: 'service_update',
        state: 'success',
        created_at: new Date(from + 30 * 60_000 + 5_000).toISOString(),
        finished_at: new Date(from + 31 * 60_000).toISOString(),
      },
    ],
  };
}

test('berth metrics draws CPU, memory (with its limit), requests and 5xx, each with its latest value, deployments marked', () => {
  const out = render('hello web', series(), '1h');
  assert.match(out, /^hello web: the last 1h, a point a minute/);
  assert.match(out, /CPU \(cores\) {2}now 0\.50/);
  assert.match(out, /Memory \(MiB, limit 512\) {2}now 159/);
  assert.match(out, /Requests a minute {2}now 159/);
  assert.match(out, /5xx a minute {2}now 0/);
  // The marker sits under the deployment's step (the 31st column of the chart), on each chart.
  const marks = out.split('\n').filter((line) => /^ +\^$/.test(line));
  assert.equal(marks.length, 4);
  assert.equal(marks[0]?.length, 10 + 30 + 1);
  assert.match(out, /Deployments .*\n {2}2026-01-01T12:30:05\.000Z {2}success {5}11111111-/);
});

test('berth metrics without samples says so rather than drawing nothing', () => {
  const out = render('hello web', { ...series(), points: [], deployments: [] }, '1d');
  assert.match(out, /^No samples of hello web in the last 1d: /);
});

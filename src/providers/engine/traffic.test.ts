import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summarize } from './traffic.ts';

test('one tally with every latency kept: counts by class and plain nearest-rank percentiles', () => {
  const latencies = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.deepEqual(summarize([{ classes: [0, 90, 0, 5, 5], requests: 100, latencies }]), {
    requests: 100,
    status_2xx: 90,
    status_3xx: 0,
    status_4xx: 5,
    status_5xx: 5,
    latency_p50_ms: 50,
    latency_p95_ms: 95,
    latency_p99_ms: 99,
  });
  assert.equal(summarize([]), null);
});

test("tallies of several processes or writes: counts add up, each kept latency weighs its tally's requests per kept latency", () => {
  // 1,000 fast requests of which 10 latencies were kept, and 20 slow ones all kept: the slow ones are
  // 2% of the requests, so only the 99th percentile reaches them (unweighted, they would be 2/3).
  const fast = { classes: [0, 1000, 0, 0, 0], requests: 1000, latencies: Array(10).fill(2) };
  const slow = { classes: [0, 0, 0, 0, 20], requests: 20, latencies: Array(20).fill(900) };
  const merged = summarize([fast, slow]);
  assert.deepEqual([merged?.requests, merged?.status_2xx, merged?.status_5xx], [1020, 1000, 20]);
  assert.deepEqual([merged?.latency_p50_ms, merged?.latency_p95_ms, merged?.latency_p99_ms], [2, 2, 900]);
});

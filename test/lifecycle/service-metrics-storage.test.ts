import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { ServiceSample } from '../../src/providers/provider.ts';
import { openStore, type Store } from '../../src/store/database.ts';
import {
  compactServiceMetrics,
  insertMinuteSamples,
  readServiceMetrics,
} from '../../src/store/repositories/service-metrics.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await createTestDatabase();
  store = await openStore({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
});
after(async () => {
  await store.close();
  await database.drop();
});

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = new Date('2026-03-08T00:00:00.000Z');

const sample = (over: Partial<ServiceSample>): ServiceSample => ({
  cpu_cores: 0.5,
  memory_bytes: 100,
  memory_limit_bytes: 1000,
  restarts: 0,
  network_rx_bytes: 10,
  network_tx_bytes: 20,
  requests: 0,
  status_2xx: 0,
  status_3xx: 0,
  status_4xx: 0,
  status_5xx: 0,
  latency_p50_ms: null,
  latency_p95_ms: null,
  latency_p99_ms: null,
  ...over,
});

test('storage stays bounded: a week of minute samples for 200 services, downsampled after a day and dropped after the retention', async () => {
  const services = 200;
  const retentionDays = 5;
  // A week of minutes before NOW for each service, written in one statement.
  await sql`
    INSERT INTO service_metrics (service_id, resolution_s, at, samples, cpu_cores, memory_bytes,
      memory_limit_bytes, restarts, network_rx_bytes, network_tx_bytes, requests, status_2xx, status_3xx,
      status_4xx, status_5xx, latency_p50_ms, latency_p95_ms, latency_p99_ms)
    SELECT s.id, 60, m, 1, 0.25, 1000, 4000, 0, 100, 200, 10, 9, 0, 0, 1, 12, 40, 80
    FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, ${services})) s,
      generate_series(${new Date(NOW.getTime() - 7 * DAY)}::timestamptz, ${new Date(NOW.getTime() - 60_000)}::timestamptz, interval '1 minute') m`.execute(
    store.db,
  );
  const count = async (resolution: number) =>
    Number(
      (
        await store.db
          .selectFrom('service_metrics')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('resolution_s', '=', resolution)
          .executeTakeFirstOrThrow()
      ).n,
    );
  assert.equal(await count(60), services * 7 * 1440);

  const done = await compactServiceMetrics(store.db, NOW, retentionDays);
  // The last day stays per minute; the days before it, within the retention, one row an hour.
  const minutes = services * 1440;
  const hours = services * (retentionDays - 1) * 24;
  assert.deepEqual([await count(60), await count(3600)], [minutes, hours]);
  assert.deepEqual(done, { dropped: services * 2 * 1440, folded: hours });

  // The next pass, a day later, folds one more day and drops one more: the total stays flat.
  const later = await compactServiceMetrics(store.db, new Date(NOW.getTime() + DAY), retentionDays);
  assert.deepEqual([await count(60), await count(3600)], [0, hours]);
  assert.deepEqual(later, { dropped: services * 24, folded: services * 24 });
});

test('an hour folds its minutes: counts add up, averages weigh each minute, latencies weigh each request', async () => {
  const id = randomUUID();
  const hour = new Date(NOW.getTime() - 3 * DAY);
  const minutes = Array.from({ length: 60 }, (_, i) => ({
    serviceId: id,
    at: new Date(hour.getTime() + i * 60_000),
    values:
      i < 30
        ? sample({
            cpu_cores: 1,
            memory_bytes: 300,
            requests: 10,
            status_2xx: 10,
            latency_p50_ms: 10,
            latency_p95_ms: 20,
            latency_p99_ms: 30,
          })
        : sample({
            cpu_cores: null,
            memory_bytes: 100,
            restarts: 1,
            requests: 30,
            status_2xx: 25,
            status_5xx: 5,
            latency_p50_ms: 50,
            latency_p95_ms: 60,
            latency_p99_ms: 70,
          }),
  }));
  await insertMinuteSamples(store.db, minutes);
  // A second process's sample of the same minute does not replace the first.
  await insertMinuteSamples(store.db, [{ serviceId: id, at: hour, values: sample({ requests: 999 }) }]);
  await compactServiceMetrics(store.db, NOW, 30);
  const points = await readServiceMetrics(store.db, id, hour, new Date(hour.getTime() + HOUR), 3600);
  assert.equal(points.length, 1);
  const [point] = points;
  assert.deepEqual(
    {
      ...point,
      latency_p50_ms: Math.round(point?.latency_p50_ms ?? 0),
      latency_p95_ms: Math.round(point?.latency_p95_ms ?? 0),
      latency_p99_ms: Math.round(point?.latency_p99_ms ?? 0),
    },
    {
      time: hour,
      samples: 60,
      cpu_cores: 1, // the minutes that could say
      memory_bytes: 200,
      memory_limit_bytes: 1000,
      restarts: 30,
      network_rx_bytes: 600,
      network_tx_bytes: 1200,
      requests: 1200,
      status_2xx: 1050,
      status_3xx: 0,
      status_4xx: 0,
      status_5xx: 150,
      // (300 requests at 10 ms, 900 at 50 ms) / 1200
      latency_p50_ms: 40,
      latency_p95_ms: 50,
      latency_p99_ms: 60,
    },
  );
});

test('a read combines the rows of each step, from its start; steps without samples are absent', async () => {
  const id = randomUUID();
  const start = new Date(NOW.getTime() - 2 * HOUR);
  await insertMinuteSamples(
    store.db,
    [0, 1, 2, 3, 10].map((m) => ({
      serviceId: id,
      at: new Date(start.getTime() + m * 60_000 + 5_000),
      values: sample({ requests: m, status_2xx: m }),
    })),
  );
  const points = await readServiceMetrics(store.db, id, start, new Date(start.getTime() + 15 * 60_000), 120);
  assert.deepEqual(
    points.map((p) => [p.time.getTime() - start.getTime(), p.samples, p.requests]),
    [
      [0, 2, 1],
      [120_000, 2, 5],
      [600_000, 1, 10],
    ],
  );
});

test('one process at a time runs the pass: another skips its turn', async () => {
  await store.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(7342029)`.execute(trx);
    if (store.kind === 'postgres') assert.equal(await compactServiceMetrics(store.db, NOW, 30), null);
  });
  assert.notEqual(await compactServiceMetrics(store.db, NOW, 30), null);
});

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { openStore } from '../../src/store/database.ts';
import { type ConsoleSession, SCREENSHOTS, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';
import { type BerthProcess, startBerth } from '../helpers/process.ts';

// Issue 29, item 3: the service page charts CPU, memory, requests and 5xx over an hour, a day or a
// week, with the deployments marked, at desktop width and at 360 px.

let db: TestDatabase;
let c: ConsoleSession;
let page: Page;
let server: BerthProcess & { url: string };
let serviceId: string;

before(async () => {
  db = await createTestDatabase();
  const env = { BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' };
  c = await startConsole(env);
  page = c.page;
  const client = createClient({ baseUrl: c.server.url, token: c.token });
  const { service } = unwrap(
    await client.POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name: 'charted web',
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
        memory_mb_max: 512,
      },
    }),
  );
  serviceId = service.id;
  for (const tag of ['v1', 'v2']) {
    const accepted = unwrap(
      await client.POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
        params: { path: { envId: c.envId, serviceId } },
        body: { docker_image_tag: tag },
      }),
    );
    const id = 'deployment_id' in accepted ? accepted.deployment_id : '';
    await pollUntil(`deployment of ${tag} to end`, async () => {
      const { deployment } = unwrap(
        await client.GET('/v1/deployments/{deploymentId}', { params: { path: { deploymentId: id } } }),
      );
      return deployment.state === 'success' || deployment.state === 'failed' ? true : undefined;
    });
  }
  // The embedded database belongs to one process: stop Berth to write a day of minutes (a daily cycle)
  // and move the deployments into it, then serve the same database again on the same port.
  const port = new URL(c.server.url).port;
  await c.server.kill();
  const store = await openStore({ databaseUrl: db.databaseUrl, dataDir: db.dataDir });
  try {
    await sql`
      INSERT INTO service_metrics (service_id, resolution_s, at, samples, cpu_cores, memory_bytes,
        memory_limit_bytes, restarts, network_rx_bytes, network_tx_bytes, requests, status_2xx, status_3xx,
        status_4xx, status_5xx, latency_p50_ms, latency_p95_ms, latency_p99_ms)
      SELECT ${serviceId}::uuid, 60, m, 1,
        0.3 + 0.2 * sin(extract(epoch FROM m) / 13751.0),
        300000000 + 80000000 * sin(extract(epoch FROM m) / 13751.0), 536870912, 0, 100, 200,
        120 + round(60 * sin(extract(epoch FROM m) / 13751.0)), 110, 0, 5,
        CASE WHEN extract(hour FROM m)::int % 7 = 0 THEN 5 ELSE 0 END, 12, 40, 80
      FROM generate_series(date_trunc('minute', now()) - interval '1 day',
        date_trunc('minute', now()) - interval '1 minute', interval '1 minute') m`.execute(store.db);
    await sql`
      UPDATE deployments SET created_at = created_at - (CASE WHEN docker_image_tag = 'v1'
        THEN interval '15 hours' ELSE interval '30 minutes' END)
      WHERE service_id = ${serviceId}::uuid`.execute(store.db);
  } finally {
    await store.close();
  }
  server = await startBerth({ ...env, BERTH_PORT: port });
  c.server.url = server.url;
});

after(async () => {
  await c?.close();
  await server?.kill();
  await db?.drop();
});

/** Pixels drawn on each chart's canvas (not transparent), in the order of the charts. */
const drawnPixels = () =>
  page.locator('[data-chart] canvas').evaluateAll((canvases) =>
    canvases.map((canvas) => {
      const c = canvas as unknown as {
        width: number;
        height: number;
        getContext(kind: '2d'): { getImageData(...box: number[]): { data: Uint8ClampedArray } } | null;
      };
      const ctx = c.getContext('2d');
      if (!ctx || c.width === 0) return 0;
      const pixels = ctx.getImageData(0, 0, c.width, c.height).data;
      let drawn = 0;
      for (let i = 3; i < pixels.length; i += 4) if ((pixels[i] as number) > 0) drawn++;
      return drawn;
    }),
  );

async function chartsDrawn(range: string): Promise<void> {
  await pollUntil(`the charts of the ${range}`, async () => {
    const drawn = await page
      .locator('.chart-canvas')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-drawn')));
    if (drawn.length !== 4 || !drawn.every((r) => r === range)) return undefined;
    const pixels = await drawnPixels();
    return pixels.length === 4 && pixels.every((n) => n > 500) ? true : undefined;
  });
}

test('the service page charts a day of metrics with the deployments marked, switched by keyboard, at 1280 and 360 px', async () => {
  await page.goto(`${server.url}/`);
  await page.evaluate((token) => sessionStorage.setItem('berth.token', token), c.token);
  await page.goto(`${server.url}/#/envs/${c.envId}/services/${serviceId}`);
  await page.getByRole('heading', { name: 'Metrics' }).waitFor();
  await chartsDrawn('last hour');
  // The hour holds the v2 deployment (30 minutes ago), not v1 (15 hours ago).
  assert.equal(await page.locator('[data-chart="cpu"] .chart-marker').count(), 1);

  // The range is a radio group: arrow keys move it.
  await page.getByRole('radio', { name: 'Last hour' }).focus();
  await page.keyboard.press('ArrowRight');
  assert.equal(await page.getByRole('radio', { name: 'Last day' }).isChecked(), true);
  await chartsDrawn('last day');
  for (const chart of ['cpu', 'memory', 'requests', 'errors'])
    assert.equal(await page.locator(`[data-chart="${chart}"] .chart-marker`).count(), 2, chart);
  assert.match(
    (await page.locator('[data-chart="memory"] .chart-value').textContent()) ?? '',
    /^\d+ MiB of 512 MiB$/,
  );
  assert.match(
    (await page.locator('[data-chart="memory"] .chart-canvas').getAttribute('aria-label')) ?? '',
    /^Memory over the last day: now \d+ MiB of 512 MiB; 2 deployments marked$/,
  );

  await page.setViewportSize({ width: 360, height: 800 });
  await pollUntil('the charts to fit 360 px', async () => {
    const widths = await page
      .locator('.chart-canvas canvas')
      .evaluateAll((els) => els.map((e) => e.getBoundingClientRect().right));
    return widths.length === 4 && widths.every((r) => r <= 360) ? true : undefined;
  });
  assert.equal(await page.locator('html').evaluate((html) => html.scrollWidth), 360, 'no sideways scroll');
  await chartsDrawn('last day');
  // The charts alone, as a phone shows them (the full pages are photographed by checkPage).
  await page
    .locator('section.metrics')
    .screenshot({ path: path.join(SCREENSHOTS, 'service-metrics-charts-360.png') });
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.locator('section.metrics').scrollIntoViewIfNeeded();
  await c.checkPage('service-metrics');

  await page.getByRole('radio', { name: 'Last day' }).focus();
  await page.keyboard.press('ArrowRight');
  await chartsDrawn('last week');
  assert.equal(await page.locator('[data-chart="errors"] .chart-marker').count(), 2);
});

test('a service with no samples yet says so on each chart, not an axis of zeros', async () => {
  const client = createClient({ baseUrl: server.url, token: c.token });
  const { service } = unwrap(
    await client.POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name: 'quiet web',
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
      },
    }),
  );
  await page.goto(`${server.url}/#/envs/${c.envId}/services/${service.id}`);
  await page.getByRole('heading', { name: 'Metrics' }).waitFor();
  const empty = page.locator('.chart').getByText('No samples in the last hour yet.');
  await pollUntil('each chart to say it has no samples', async () =>
    (await empty.count()) === 4 ? true : undefined,
  );
  assert.equal(await page.locator('.chart canvas').count(), 0, 'no axes drawn over nothing');
  assert.equal(await page.locator('[data-chart="memory"] .chart-value').textContent(), 'no data');
  await page.locator('section.metrics').scrollIntoViewIfNeeded();
  await c.checkPage('service-metrics-empty');
});

/**
 * The metrics row of `npm run bench` (issue 29): poll throughput (GET /v1/deployments/{id}, a finished
 * deployment, a token) with metrics on against the same Berth with them off, in the same run. "On":
 * Berth's own metrics served (BERTH_METRICS_BIND) and scraped every 15 s, and the service metrics
 * collector ticking every second (BERTH_METRICS_INTERVAL_MS=1000) over BENCH_METRICS_SERVICES (100)
 * deployed services: a tick looks for services not sampled yet this minute, so each minute's first one
 * samples all of them. "Off": neither (BERTH_METRICS_INTERVAL_MS=0). Two `berth serve` processes on
 * embedded databases of their own, the same services in each, loaded at the same time (so whatever
 * else the machine runs weighs on both alike) for rounds of a minute, each of which holds one full
 * collection round. At the end the "on" process's /metrics must have counted the load and its
 * services must have samples.
 * Settings: BENCH_ROUNDS (3), BENCH_DURATION_S (60), BENCH_WARMUP_S (1), BENCH_CONNECTIONS (50 per
 * process), BENCH_METRICS_SERVICES (100). Run alone with `node bench/metrics.ts`.
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { median } from './median.ts';
import { type AddRow, BERTH_BIN, cpuSeconds, log, spawnNode, waitFor } from './process.ts';
import { BENCH_SERVICE } from './service.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS || 3);
/** A minute by default: each round holds one full collection round, as often as it comes. */
const DURATION_S = Number(process.env.BENCH_DURATION_S || 60);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S || 1);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS || 50);
const SERVICES = Number(process.env.BENCH_METRICS_SERVICES || 100);
/** The scrape interval of docs/metrics.md's example Prometheus configuration. */
const SCRAPE_EVERY_MS = 15_000;
/** Services created (and deployed) at once while setting up. */
const SETUP_AT_ONCE = 10;
/** Metrics on may cost at most 5% of the poll throughput. */
const TARGET_RATIO = 0.95;

interface Berth {
  child: ChildProcess;
  out(): string;
  url: string;
  token: string;
  pollUrl: string;
  metricsUrl: string | undefined;
  /** The services' metrics URL of one of them. */
  serviceMetricsUrl: string;
  stop(): Promise<void>;
}

async function api(berth: { url: string; token: string }, method: string, url: string, body?: unknown) {
  const res = await fetch(new URL(url, berth.url), {
    method,
    headers: {
      authorization: `Bearer ${berth.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
  // biome-ignore lint/suspicious/noExplicitAny: the bench reads a few fields of the envelope
  return JSON.parse(text) as { data: any };
}

/** `berth serve` on a fresh embedded data directory, with SERVICES deployed services, one deployment of which is polled. */
async function startBerth(metrics: boolean): Promise<Berth> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-metrics-'));
  const proc = spawnNode([BERTH_BIN, 'serve'], {
    BERTH_DATA_DIR: dataDir,
    BERTH_PORT: '0',
    BERTH_RATE_LIMIT_PER_MIN: '10000000',
    BERTH_SIM_STEP_MS: '10',
    BERTH_METRICS_BIND: metrics ? '127.0.0.1:0' : '',
    BERTH_METRICS_INTERVAL_MS: metrics ? '1000' : '0',
  });
  const { child } = proc;
  const stop = async () => {
    await proc.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const url = await waitFor('berth to listen', () => {
      if (child.exitCode !== null) throw new Error(`berth exited: ${proc.out()}`);
      return /listening on (http:\/\/\S+)/.exec(proc.out())?.[1];
    });
    const token = await waitFor(
      'the first start',
      () => /API token:\s+([0-9a-f-]{36})/.exec(proc.out())?.[1],
    );
    const envId = await waitFor(
      'the first start',
      () => /environment:\s+([0-9a-f-]{36})/.exec(proc.out())?.[1],
    );
    const berth = { url, token };
    await waitFor('the environment to be available', async () =>
      (await api(berth, 'GET', `/v1/environments/${envId}`)).data.environment.state === 'available'
        ? true
        : undefined,
    );
    const services = `/v1/environments/${envId}/services`;
    const deployments: string[] = [];
    let firstService = '';
    for (let i = 0; i < SERVICES; i += SETUP_AT_ONCE) {
      const batch = Array.from({ length: Math.min(SETUP_AT_ONCE, SERVICES - i) }, async (_, k) => {
        const service = await api(berth, 'POST', services, {
          ...BENCH_SERVICE,
          name: `bench metrics ${String.fromCharCode(97 + ((i + k) % 26))} ${String.fromCharCode(97 + Math.floor((i + k) / 26))}`,
        });
        const id = service.data.service.id as string;
        if (i + k === 0) firstService = id;
        const deployed = await api(berth, 'POST', `${services}/${id}/deploy`, {});
        deployments.push(deployed.data.deployment_id as string);
      });
      await Promise.all(batch);
    }
    for (const id of deployments) {
      await waitFor('the deployments to succeed', async () =>
        (await api(berth, 'GET', `/v1/deployments/${id}`)).data.deployment.state === 'success'
          ? true
          : undefined,
      );
    }
    const pollUrl = `${url}/v1/deployments/${deployments[0]}`;
    const serviceMetricsUrl = `${services}/${firstService}/metrics`;
    const metricsUrl = metrics ? /Metrics: (http:\/\/\S+)/.exec(proc.out())?.[1] : undefined;
    if (metrics && !metricsUrl) throw new Error(`berth printed no metrics address: ${proc.out()}`);
    return { child, out: proc.out, url, token, pollUrl, metricsUrl, serviceMetricsUrl, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls per second, and the server's CPU microseconds per poll. */
async function pollRate(berth: Berth): Promise<{ rps: number; cpuUs: number }> {
  const options = {
    url: berth.pollUrl,
    headers: { authorization: `Bearer ${berth.token}` },
    connections: CONNECTIONS,
  };
  if (WARMUP_S > 0) await autocannon({ ...options, duration: WARMUP_S });
  const cpuFrom = cpuSeconds(berth.child.pid);
  const result = await autocannon({ ...options, duration: DURATION_S });
  const cpuUs = ((cpuSeconds(berth.child.pid) - cpuFrom) * 1e6) / Math.max(1, result['2xx']);
  if (result.errors > 0 || result.timeouts > 0 || result.non2xx > 0) {
    throw new Error(
      `${berth.pollUrl}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx`,
    );
  }
  return { rps: result.requests.average, cpuUs };
}

/** GET /metrics every SCRAPE_EVERY_MS, as a Prometheus would, until stopped. */
function scrape(metricsUrl: string): { stop(): Promise<void> } {
  let last: Promise<unknown> = fetch(metricsUrl).then((res) => res.text());
  const timer = setInterval(() => {
    last = fetch(metricsUrl).then((res) => res.text());
  }, SCRAPE_EVERY_MS);
  return {
    stop: async () => {
      clearInterval(timer);
      await last;
    },
  };
}

export async function metricsRows(addRow: AddRow): Promise<void> {
  log(`metrics: poll throughput with metrics collected vs without (${SERVICES} services each)`);
  const off = await startBerth(false);
  let on: Berth | undefined;
  try {
    on = await startBerth(true);
    const rounds: Record<string, number>[] = [];
    const scrapes = scrape(on.metricsUrl as string);
    for (let r = 0; r < ROUNDS; r++) {
      // Both at once: whatever else the machine runs meanwhile weighs on both alike.
      const [offRate, onRate] = await Promise.all([pollRate(off), pollRate(on)]);
      rounds.push({
        metrics_on_rps: onRate.rps,
        metrics_off_rps: offRate.rps,
        ratio_rps: onRate.rps / offRate.rps,
        metrics_on_server_cpu_us: onRate.cpuUs,
        metrics_off_server_cpu_us: offRate.cpuUs,
        ratio_cpu: onRate.cpuUs / offRate.cpuUs,
        load_average_1m: os.loadavg()[0] as number,
      });
    }
    await scrapes.stop();
    // The "on" side really collected: its /metrics counted the polls.
    const text = await (await fetch(on.metricsUrl as string)).text();
    const counted =
      /^berth_http_request_duration_seconds_count\{route="\/v1\/deployments\/:deploymentId",method="GET",status="200"\} (\d+)$/m.exec(
        text,
      );
    if (!counted || Number(counted[1]) < 1000)
      throw new Error(`the metrics did not count the polls:\n${text.slice(0, 2000)}`);
    // ... and its collector sampled the services.
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const points = (
      await api(on, 'GET', `${on.serviceMetricsUrl}?from=${from}&to=${new Date().toISOString()}`)
    ).data.points as unknown[];
    if (points.length === 0) throw new Error('the collector stored no sample of the services');
    addRow(
      'poll GET /v1/deployments/{id} with metrics on vs off, embedded',
      `>= ${TARGET_RATIO}x of the same Berth without metrics (issue 29)`,
      rounds,
      (m) => (m.ratio_rps as number) >= TARGET_RATIO,
    );
  } finally {
    await on?.stop();
    await off.stop();
  }
}

// Run alone: the row on stdout.
if (process.argv[1] === new URL(import.meta.url).pathname) {
  await metricsRows((measure, target, rounds, met) => {
    const keys = Object.keys(rounds[0] ?? {});
    const med = Object.fromEntries(
      keys.map((k) => [k, Math.round(median(rounds.map((r) => r[k] as number)) * 100) / 100]),
    );
    console.log(JSON.stringify({ measure, target, rounds, median: med, met: met(med) }, null, 2));
  });
}

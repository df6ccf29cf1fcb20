import { createRequire } from 'node:module';
import type { Command } from 'commander';
import { type ServiceMetrics, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { durationFlag } from './time-spans.ts';

const require = createRequire(import.meta.url);
/** asciichart, loaded only to draw on a terminal. */
const charts = (): {
  plot(series: number[], config: { height: number; format: (x: number) => string }): string;
} => require('asciichart');

const LABEL_WIDTH = 10;
const CHART_HEIGHT = 6;

type Point = ServiceMetrics['points'][number];

/** The step that gives about one point per column of the terminal (at least a minute, as the API asks). */
function stepFor(rangeMs: number): number {
  const columns = Math.min(Math.max((process.stdout.columns ?? 80) - LABEL_WIDTH - 4, 20), 240);
  return Math.max(60, Math.ceil(rangeMs / 1000 / columns / 60) * 60);
}

const number = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2)).padStart(LABEL_WIDTH - 1);

/** One chart: its title with the latest value, the series (a step without samples plotted as 0), deployment marks. */
function chart(
  data: ServiceMetrics,
  title: string,
  value: (p: Point) => number | null,
  shown: (x: number) => string,
): string {
  const from = Date.parse(data.from);
  const count = Math.ceil((Date.parse(data.to) - from) / (data.step * 1000));
  const series = new Array<number>(count).fill(0);
  let latest: number | null = null;
  for (const point of data.points) {
    const i = Math.floor((Date.parse(point.time) - from) / (data.step * 1000));
    const v = value(point);
    if (i >= 0 && i < count && v !== null) series[i] = v;
    if (v !== null) latest = v;
  }
  const marks = new Array<string>(count).fill(' ');
  for (const d of data.deployments) {
    const i = Math.floor((Date.parse(d.created_at) - from) / (data.step * 1000));
    if (i >= 0 && i < count) marks[i] = d.state === 'failed' ? 'x' : '^';
  }
  const head = `${title}  now ${latest === null ? '-' : shown(latest)}`;
  const plot = charts().plot(series, { height: CHART_HEIGHT, format: number });
  const markRow = marks.some((m) => m !== ' ')
    ? `\n${' '.repeat(LABEL_WIDTH)}${marks.join('').trimEnd()}`
    : '';
  return `${head}\n${plot}${markRow}\n`;
}

const MiB = 1024 * 1024;

/** The service's charts as a person reads them: CPU, memory, requests and 5xx, then the deployments marked. */
export function render(name: string, data: ServiceMetrics, range: string): string {
  if (data.points.length === 0)
    return `No samples of ${name} in the last ${range}: nothing of it runs, or the first sample is still to come (one a minute).\n`;
  const limit = data.points.findLast((p) => p.memory_limit_bytes !== null)?.memory_limit_bytes;
  const perStep = data.step === 60 ? 'a minute' : `per ${data.step} s`;
  const parts = [
    `${name}: the last ${range}, a point ${data.step === 60 ? 'a minute' : `every ${data.step} s`}, from ${data.from} to ${data.to}\n`,
    chart(
      data,
      'CPU (cores)',
      (p) => p.cpu_cores,
      (x) => x.toFixed(2),
    ),
    chart(
      data,
      `Memory (MiB${limit ? `, limit ${Math.round(limit / MiB)}` : ''})`,
      (p) => (p.memory_bytes === null ? null : p.memory_bytes / MiB),
      (x) => x.toFixed(0),
    ),
    chart(
      data,
      `Requests ${perStep}`,
      (p) => p.requests,
      (x) => x.toFixed(0),
    ),
    chart(
      data,
      `5xx ${perStep}`,
      (p) => p.status_5xx,
      (x) => x.toFixed(0),
    ),
  ];
  if (data.deployments.length > 0)
    parts.push(
      `Deployments (^ on the time axis, x failed):\n${data.deployments
        .map((d) => `  ${d.created_at}  ${d.state.padEnd(11)} ${d.id}`)
        .join('\n')}\n`,
    );
  return parts.join('\n');
}

export function metricsCommands(program: Command): void {
  withExamples(
    common(
      program
        .command('metrics <service>')
        .description(
          "a service's CPU, memory, requests and 5xx as terminal charts, with its deployments marked",
        )
        .option('--since <duration>', 'how far back: 1h (default), 1d, 1w, or any number of m, h, d or w'),
    ),
    'metrics "hello web"',
    'metrics "hello web" --since 1d',
    'metrics "hello web" --since 1w -o json',
  ).action(
    withSession<[string], { since?: string }>(async (session, [reference], options) => {
      const label = options.since ?? '1h';
      const range = durationFlag('--since', label);
      const { env, service } = await session.service(reference);
      const to = new Date();
      const from = new Date(to.getTime() - range);
      const table = session.out.format === 'table';
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}/services/{serviceId}/metrics', {
          params: {
            path: { envId: env.id, serviceId: service.id },
            // Scripts get the API's own step for the range; a chart one point per column.
            query: {
              from: from.toISOString(),
              to: to.toISOString(),
              step: table ? stepFor(range) : undefined,
            },
          },
        }),
      );
      if (!table) return session.out.item(data, undefined, data);
      process.stdout.write(render(service.name, data, label));
    }),
  );
}

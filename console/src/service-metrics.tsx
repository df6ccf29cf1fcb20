import { useEffect, useRef, useState } from 'preact/hooks';
import { api, unwrap } from './api.ts';
import type { ChartDef, ServiceMetrics as Metrics, MetricsPoint as Point } from './types.ts';
import { ErrorBox, Loading, useLoad } from './ui.tsx';

const RANGES = [
  { id: 'hour', label: 'Last hour', ms: 3_600_000 },
  { id: 'day', label: 'Last day', ms: 86_400_000 },
  { id: 'week', label: 'Last week', ms: 7 * 86_400_000 },
] as const;
type RangeId = (typeof RANGES)[number]['id'];

/** Samples arrive once a minute: read again this often. */
const REFRESH_MS = 60_000;

/** The range's label travels with its data: while the next range loads, the charts still show this one. */
async function loadMetrics(
  envId: string,
  serviceId: string,
  range: (typeof RANGES)[number],
): Promise<{ rangeLabel: string; metrics: Metrics }> {
  const to = new Date();
  const from = new Date(to.getTime() - range.ms);
  const metrics = unwrap(
    await api().GET('/v1/environments/{envId}/services/{serviceId}/metrics', {
      params: { path: { envId, serviceId }, query: { from: from.toISOString(), to: to.toISOString() } },
    }),
  );
  return { rangeLabel: range.label.toLowerCase(), metrics };
}

const mib = (b: number) => `${(b / 1_048_576).toFixed(b < 10 * 1_048_576 ? 1 : 0)} MiB`;
const num = (n: number) =>
  n >= 100 ? Math.round(n).toString() : n.toFixed(n >= 10 ? 1 : 2).replace(/\.?0+$/, '');

/** Counts per minute, whatever the step: a point's `samples` is the minutes it combines. */
const perMinute = (count: number, p: Point) => (p.samples > 0 ? count / p.samples : null);

const CHARTS: ChartDef[] = [
  {
    id: 'cpu',
    title: 'CPU',
    unit: 'cores',
    value: (p) => p.cpu_cores,
    format: (v) => `${num(v)} cores`,
    tick: num,
  },
  {
    id: 'memory',
    title: 'Memory',
    unit: 'MiB',
    value: (p) => p.memory_bytes,
    format: mib,
    tick: (v) => String(Math.round(v / 1_048_576)),
    limit: (p) => p.memory_limit_bytes,
  },
  {
    id: 'requests',
    title: 'Requests',
    unit: 'per minute',
    value: (p) => perMinute(p.requests, p),
    format: (v) => `${num(v)}/min`,
    tick: num,
  },
  {
    id: 'errors',
    title: 'Errors (5xx)',
    unit: 'per minute',
    value: (p) => perMinute(p.status_5xx, p),
    format: (v) => `${num(v)}/min`,
    tick: num,
  },
];

/** CPU, memory, requests and 5xx of a service over a chosen range, deployments marked (docs/console.md). */
export function ServiceMetrics(props: { envId: string; serviceId: string }) {
  const [range, setRange] = useState<RangeId>('hour');
  const { data, error, loading, reload } = useLoad(
    () => loadMetrics(props.envId, props.serviceId, RANGES.find((r) => r.id === range) ?? RANGES[0]),
    [props.envId, props.serviceId, range],
    { refreshMs: REFRESH_MS },
  );
  return (
    <section aria-labelledby="metrics-title" class="metrics">
      <h2 id="metrics-title">Metrics</h2>
      <fieldset class="range-picker">
        <legend class="sr-only">Range</legend>
        {RANGES.map((r) => (
          <label key={r.id} class={r.id === range ? 'on' : ''}>
            <input
              type="radio"
              name="metrics-range"
              value={r.id}
              checked={r.id === range}
              onChange={() => setRange(r.id)}
            />
            {r.label}
          </label>
        ))}
      </fieldset>
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : !data ? (
        <Loading what="metrics" />
      ) : (
        <>
          <div class="charts" aria-busy={loading}>
            {CHARTS.map((c) => (
              <Chart key={c.id} def={c} data={data.metrics} rangeLabel={data.rangeLabel} />
            ))}
          </div>
          <p class="muted chart-note">
            {data.metrics.deployments.length === 1
              ? '1 deployment in this range'
              : `${data.metrics.deployments.length} deployments in this range`}
            , marked by vertical lines.
          </p>
        </>
      )}
    </section>
  );
}

function latest(points: Point[], value: (p: Point) => number | null): number | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const v = value(points[i] as Point);
    if (v !== null) return v;
  }
  return null;
}

function Chart(props: { def: ChartDef; data: Metrics; rangeLabel: string }) {
  const { def, data } = props;
  const box = useRef<HTMLDivElement>(null);
  const current = latest(data.points, def.value);
  const limit = def.limit ? latest(data.points, def.limit) : null;
  const currentText =
    current === null
      ? 'no data'
      : `${def.format(current)}${limit !== null ? ` of ${def.format(limit)}` : ''}`;
  // No sample to draw: a chart of nothing would show only an axis of zeros ("0 0 0" for memory).
  const empty = current === null;
  useEffect(() => {
    const el = box.current;
    if (!el || empty) return;
    let plot: { destroy(): void; setSize(s: { width: number; height: number }): void } | undefined;
    let observer: ResizeObserver | undefined;
    let live = true;
    // uPlot is loaded with the first chart, so pages without charts do not pay for it.
    import('./chart.ts').then(({ drawChart, CHART_HEIGHT }) => {
      if (!live) return;
      plot = drawChart(el, def, data);
      // Which range the canvas shows (the label changes at once, the drawing a moment later).
      el.dataset.drawn = props.rangeLabel;
      observer = new ResizeObserver(() => plot?.setSize({ width: el.clientWidth, height: CHART_HEIGHT }));
      observer.observe(el);
    });
    return () => {
      live = false;
      observer?.disconnect();
      plot?.destroy();
      delete el.dataset.drawn;
    };
  }, [data, def, props.rangeLabel, empty]);
  return (
    <figure class="chart" data-chart={def.id}>
      <figcaption>
        <span class="chart-title">
          {def.title} <span class="chart-unit">({def.unit})</span>
        </span>{' '}
        <span class="chart-value">{currentText}</span>
      </figcaption>
      {empty ? (
        <p class="chart-canvas empty">No samples in the {props.rangeLabel} yet.</p>
      ) : (
        <div
          ref={box}
          class="chart-canvas"
          role="img"
          aria-label={`${def.title} over the ${props.rangeLabel}: now ${currentText}; ${data.deployments.length} deployments marked`}
        />
      )}
    </figure>
  );
}

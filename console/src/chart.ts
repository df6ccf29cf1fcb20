import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { ChartDef, ServiceMetrics } from './types.ts';

/** Matches .chart-canvas's min-height in styles.css. */
export const CHART_HEIGHT = 160;

/** Draws one metric into el with uPlot; deployments are vertical lines at their creation time. */
export function drawChart(el: HTMLElement, def: ChartDef, data: ServiceMetrics): uPlot {
  const times = data.points.map((p) => Date.parse(p.time) / 1000);
  const values = data.points.map(def.value);
  const series: uPlot.Series[] = [
    {},
    { label: def.title, stroke: '#2563eb', fill: 'rgba(37,99,235,0.12)', width: 1.5 },
  ];
  const columns: uPlot.AlignedData = [times, values];
  if (def.limit) {
    series.push({ label: 'Limit', stroke: '#b91c1c', dash: [6, 4], width: 1 });
    (columns as (number | null)[][]).push(data.points.map(def.limit));
  }
  const opts: uPlot.Options = {
    width: el.clientWidth || 300,
    height: CHART_HEIGHT,
    legend: { show: false },
    cursor: { show: false },
    scales: {
      x: { time: true, min: Date.parse(data.from) / 1000, max: Date.parse(data.to) / 1000 },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    axes: [
      { stroke: '#555', grid: { stroke: '#eee' }, size: 30 },
      { stroke: '#555', grid: { stroke: '#eee' }, size: 44, values: (_u, ticks) => ticks.map(def.tick) },
    ],
    series,
    hooks: {
      // Markers are elements over the plot (not canvas strokes) so they carry a title and can be found.
      draw: [
        (u) => {
          for (const old of u.over.querySelectorAll('.chart-marker')) old.remove();
          for (const d of data.deployments) {
            const x = u.valToPos(Date.parse(d.created_at) / 1000, 'x');
            const mark = document.createElement('span');
            mark.className = 'chart-marker';
            mark.style.left = `${x}px`;
            mark.title = `Deployment (${d.type}, ${d.state}) at ${new Date(d.created_at).toLocaleString()}`;
            u.over.append(mark);
          }
        },
      ],
    },
  };
  return new uPlot(opts, columns, el);
}

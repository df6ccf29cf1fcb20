import {
  type DeploymentMarker,
  deploymentMarkers,
  type MetricsPoint,
  readServiceMetrics,
} from '../../store/repositories/service-metrics.ts';
import type { FieldError } from '../errors.ts';
import { ValidationError } from '../errors.ts';
import type { Deps } from './context.ts';

/** The finest step: the collector samples once a minute. */
export const MIN_METRICS_STEP_S = 60;
/** The most points one read returns: a day at one a minute. */
export const MAX_METRICS_POINTS = 1440;

const HOUR_MS = 3_600_000;

export interface MetricsQuery {
  from?: string;
  to?: string;
  step?: number;
}

export interface MetricsSeries {
  from: Date;
  to: Date;
  step: number;
  points: MetricsPoint[];
  deployments: DeploymentMarker[];
}

/** A step that fits the range when none is asked for: a minute up to 6 hours, 5 minutes up to a day, an hour beyond. */
function defaultStep(rangeMs: number): number {
  if (rangeMs <= 6 * HOUR_MS) return 60;
  if (rangeMs <= 24 * HOUR_MS) return 300;
  return 3600;
}

/**
 * A service's runtime metrics over [from, to), one point per step, and its deployments in the range.
 * Each bound a query may break is a field error naming its limit: `from` after `to`, `from` before the
 * retention, a range of more than MAX_METRICS_POINTS steps (the step's minimum is the schema's).
 */
export async function serviceMetrics(
  deps: Pick<Deps, 'store' | 'config'>,
  serviceId: string,
  query: MetricsQuery,
  now: Date = new Date(),
): Promise<MetricsSeries> {
  const to = query.to ? new Date(query.to) : now;
  const from = query.from ? new Date(query.from) : new Date(to.getTime() - HOUR_MS);
  const range = to.getTime() - from.getTime();
  const errors: FieldError[] = [];
  const fromErrors: string[] = [];
  if (range <= 0) fromErrors.push('from must be before to');
  const days = deps.config.metricsRetentionDays;
  const oldest = new Date(now.getTime() - days * 24 * HOUR_MS);
  if (from < oldest) {
    fromErrors.push(
      `from must be within the retention of ${days} days (BERTH_METRICS_RETENTION_DAYS): not before ${oldest.toISOString()}`,
    );
  }
  // One error per field, as everywhere: both reasons in it when `from` breaks both bounds.
  if (fromErrors.length > 0) errors.push({ field: 'from', error: fromErrors.join('; ') });
  const step = query.step ?? defaultStep(range);
  const points = Math.ceil(range / (step * 1000));
  if (points > MAX_METRICS_POINTS) {
    const fits = Math.ceil(range / 1000 / MAX_METRICS_POINTS / 60) * 60;
    errors.push({
      field: 'step',
      error: `the range holds ${points} steps of ${step} s, more than ${MAX_METRICS_POINTS}: use a step of at least ${fits} s or a shorter range`,
    });
  }
  if (errors.length > 0) throw ValidationError.fields(errors);
  const db = deps.store.db;
  const [series, deployments] = await Promise.all([
    readServiceMetrics(db, serviceId, from, to, step),
    deploymentMarkers(db, serviceId, from, to),
  ]);
  return { from, to, step, points: series, deployments };
}

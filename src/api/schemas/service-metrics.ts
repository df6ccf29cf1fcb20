import { Type } from 'typebox';
import { DEPLOYMENT_STATES, DEPLOYMENT_TYPES } from '../../domain/deployment-states.ts';
import { MAX_METRICS_POINTS, MIN_METRICS_STEP_S } from '../../domain/usecases/service-metrics.ts';
import { MAX_MARKERS } from '../../store/repositories/service-metrics.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

export const ServiceMetricsQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 40,
        description: 'the start of the range (default: an hour before `to`); not before the retention',
      }),
    ),
    to: Type.Optional(
      Type.String({ format: 'date-time', maxLength: 40, description: 'the end of the range (default: now)' }),
    ),
    step: Type.Optional(
      Type.Integer({
        minimum: MIN_METRICS_STEP_S,
        maximum: 31 * 86_400,
        description:
          'seconds per point (at least 60; default: 60 up to 6 hours, 300 up to a day, 3600 beyond); ' +
          `the range may hold at most ${MAX_METRICS_POINTS} steps`,
      }),
    ),
  },
  { additionalProperties: false },
);

const Count = (description: string) => Nullable(Type.Number({ minimum: 0, description }));

export const MetricsPoint = Type.Object({
  time: DateTime,
  samples: Type.Integer({ minimum: 0, description: 'how many one-minute samples the point combines' }),
  cpu_cores: Count('CPU in use, in cores, summed over the replicas and averaged over the step'),
  memory_bytes: Count('memory in use by its busiest replica, averaged over the step'),
  memory_limit_bytes: Count("a replica's memory limit (memory_mb_max); null without one"),
  restarts: Count('replica restarts during the step'),
  network_rx_bytes: Count('bytes received during the step'),
  network_tx_bytes: Count('bytes sent during the step'),
  requests: Type.Number({ minimum: 0, description: 'requests the ingress answered during the step' }),
  status_2xx: Type.Number({ minimum: 0 }),
  status_3xx: Type.Number({ minimum: 0 }),
  status_4xx: Type.Number({ minimum: 0 }),
  status_5xx: Type.Number({ minimum: 0 }),
  latency_p50_ms: Count(
    'median latency, in milliseconds (request-weighted over the step); null without requests',
  ),
  latency_p95_ms: Count('95th percentile latency, in milliseconds'),
  latency_p99_ms: Count('99th percentile latency, in milliseconds'),
});

export const DeploymentMarker = Type.Object({
  id: Uuid,
  type: StringEnum(DEPLOYMENT_TYPES, { maxLength: 20 }),
  state: StringEnum(DEPLOYMENT_STATES, { maxLength: 20 }),
  created_at: DateTime,
  finished_at: Nullable(DateTime),
});

export const ServiceMetrics = Type.Object({
  from: DateTime,
  to: DateTime,
  step: Type.Integer({ minimum: MIN_METRICS_STEP_S, description: 'seconds per point' }),
  points: Type.Array(MetricsPoint, {
    maxItems: MAX_METRICS_POINTS,
    description: 'one per step that has samples, oldest first (a step without any is absent)',
  }),
  deployments: Type.Array(DeploymentMarker, {
    maxItems: MAX_MARKERS,
    description: 'the deployments created in the range, oldest first: markers on the time axis',
  }),
});

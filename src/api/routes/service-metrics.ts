import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { serviceMetrics } from '../../domain/usecases/service-metrics.ts';
import { serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, errorResponses, ServiceParams } from '../schemas/common.ts';
import { ServiceMetrics, ServiceMetricsQuery } from '../schemas/service-metrics.ts';
import { metricsView, success } from '../views.ts';

export const serviceMetricsRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/environments/:envId/services/:serviceId/metrics',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A service's runtime metrics",
        description:
          'CPU, memory (against its limit), restarts, network, and from the ingress requests, status classes and ' +
          'latency percentiles, one point per `step` seconds over [`from`, `to`), with the deployments created ' +
          'in the range. Sampled once a minute; kept per minute for a day, then per hour, for ' +
          'BERTH_METRICS_RETENTION_DAYS (30 by default). 422 names the field and its limit: `from` after `to` ' +
          'or before the retention, a step under 60 s, more than 1440 steps (docs/metrics.md).',
        params: ServiceParams,
        querystring: ServiceMetricsQuery,
        response: { 200: Envelope(ServiceMetrics), ...errorResponses(...AUTH_ERRORS, 422) },
      },
    },
    async (request) => {
      const series = await serviceMetrics(deps, serviceOf(request).id, request.query);
      return success(metricsView(series));
    },
  );
};

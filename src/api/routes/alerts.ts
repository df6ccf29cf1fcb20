import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { DEFAULT_ALERT_RULES, effectiveAlertRules } from '../../domain/alert-rules.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { alertData, listAlerts, ownAlertRules, putAlertRules } from '../../store/repositories/alerts.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { serviceOf } from '../plugins/scope.ts';
import { Alert, AlertRulesAnswer, AlertRulesBody } from '../schemas/alerts.ts';
import { AUTH_ERRORS, Envelope, errorResponses, pagedListSchema, ServiceParams } from '../schemas/common.ts';
import { success } from '../views.ts';

const RULES_DOC =
  'Rules: crash_loop (restarts in a window), deploy_failed (the latest deployment failed), memory_high ' +
  '(memory above a percent of its limit every minute of a window), error_rate_high (5xx share of at least ' +
  'min_requests requests in a window), no_ready_replica (no ready replica while the service should run). ' +
  'Evaluated after each one-minute collection round (docs/metrics.md).';

export const alertRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const { db } = deps.store;

  app.get(
    '/environments/:envId/services/:serviceId/alert-rules',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A service's alert rules",
        description: `Its rules (its own settings over the defaults) and the defaults. ${RULES_DOC}`,
        params: ServiceParams,
        response: { 200: Envelope(AlertRulesAnswer), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    async (request) => {
      const own = await ownAlertRules(db, serviceOf(request).id);
      return success({ rules: effectiveAlertRules(own), defaults: DEFAULT_ALERT_RULES });
    },
  );

  app.put(
    '/environments/:envId/services/:serviceId/alert-rules',
    {
      config: { role: 'developer' },
      schema: {
        summary: "Set a service's alert rules",
        description:
          'Replaces its own settings: each rule and field left out takes the default. A rule turned off ' +
          `resolves its open alert at the next evaluation. 422 names each field out of range. ${RULES_DOC}`,
        params: ServiceParams,
        body: AlertRulesBody,
        response: { 200: Envelope(AlertRulesAnswer), ...errorResponses(...AUTH_ERRORS, 422) },
      },
    },
    async (request) => {
      await putAlertRules(db, serviceOf(request).id, request.body);
      return success({ rules: effectiveAlertRules(request.body), defaults: DEFAULT_ALERT_RULES });
    },
  );

  app.get(
    '/environments/:envId/services/:serviceId/alerts',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A service's alerts, newest opened first",
        description:
          'Open and resolved, with when each opened and resolved, the value that tripped it and why.',
        params: ServiceParams,
        ...pagedListSchema('alerts', Alert),
      },
    },
    async (request) => {
      const page = await listAlerts(db, serviceOf(request).id, pageOf(request.query));
      return success({ alerts: page.items.map(alertData), next_cursor: nextCursor(page.next) });
    },
  );
};

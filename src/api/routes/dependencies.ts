import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { listResources } from '../../store/repositories/resources.ts';
import { serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, errorResponses, ServiceParams } from '../schemas/common.ts';
import { ServiceDependenciesData } from '../schemas/dependencies.ts';
import { success } from '../views.ts';

export const dependencyRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/environments/:envId/services/:serviceId/dependencies',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A service's ops.json dependencies as made",
        description:
          'Each resource the provider made (or is making) for the ops.json `dependencies` of the service: its ' +
          'kind, type, id and prefix, its state, its resolved attributes (never a password) and when it was ' +
          'provisioned. A deployment makes, updates and deletes them; docs/ops-json.md.',
        params: ServiceParams,
        response: { 200: Envelope(ServiceDependenciesData), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    async (request) => {
      const rows = await listResources(deps.store.db, serviceOf(request).id);
      return success({
        dependencies: rows.map((r) => ({
          kind: r.kind,
          type: r.type,
          id: r.resource_id,
          prefix: r.prefix,
          state: r.state,
          attributes: r.attributes,
          error: r.error,
          provisioned_at: r.provisioned_at ? r.provisioned_at.toISOString() : null,
        })),
      });
    },
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { inScope } from '../../domain/roles.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { liveIdentity } from '../../domain/usecases/environments.ts';
import { listEnvironments } from '../../store/repositories/environments.ts';
import { authOf } from '../plugins/auth.ts';
import { ConditionalHeaders, conditionalResponses } from '../plugins/conditional-reads.ts';
import { environmentOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, EnvIdParams, errorResponses, NoQuery } from '../schemas/common.ts';
import { Environment, LiveEnvironment } from '../schemas/environments.ts';
import { environmentView, success } from '../views.ts';

export const environmentRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/environments',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'List environments, oldest first',
        description: 'A token limited to some environments lists only those.',
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ environments: Type.Array(Environment) })),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const auth = authOf(request);
      const rows = await listEnvironments(deps.store.db, auth.accountId);
      // A token narrowed to some environments sees only those.
      const visible = rows.filter((env) => inScope(auth.environments, env.id));
      return success({ environments: visible.map(environmentView) });
    },
  );

  app.get(
    '/environments/:envId',
    {
      config: { role: 'viewer', etag: true },
      schema: {
        summary: 'Get an environment with its live network identity',
        description:
          'ingress_host, public_nat_ips and svc_role_arn are read from the provider at request time (cached 3 s at most); ' +
          'they appear both inside `environment` and at the top of `data`. If the provider cannot be reached: 500.',
        params: EnvIdParams,
        headers: ConditionalHeaders,
        response: {
          ...conditionalResponses(
            Envelope(
              Type.Object({
                environment: LiveEnvironment,
                ingress_host: LiveEnvironment.properties.ingress_host,
                public_nat_ips: LiveEnvironment.properties.public_nat_ips,
                svc_role_arn: LiveEnvironment.properties.svc_role_arn,
              }),
            ),
          ),
          ...errorResponses(...AUTH_ERRORS),
        },
      },
    },
    async (request) => {
      const env = environmentOf(request);
      const { ingress_url: _, ...identity } = await liveIdentity(deps, env);
      return success({ environment: { ...environmentView(env), ...identity }, ...identity });
    },
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { TERMINAL_DEPLOYMENT_STATES } from '../../domain/deployment-states.ts';
import { DeployRequestBody } from '../../domain/inputs.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { deploy } from '../../domain/usecases/deployments.ts';
import { liveIdentity } from '../../domain/usecases/environments.ts';
import { deployPreview } from '../../domain/usecases/previews.ts';
import { changeTag } from '../../store/notifications.ts';
import { listDeployments } from '../../store/repositories/deployments.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { actorOf, authOf, requireFeature } from '../plugins/auth.ts';
import { conditionalResponses, WaitingHeaders } from '../plugins/conditional-reads.ts';
import { deploymentOf, environmentOf, loadScope, serviceOf } from '../plugins/scope.ts';
import { cachedGet, type ReadCache, readKeys } from '../read-cache.ts';
import {
  AUTH_ERRORS,
  Envelope,
  errorResponses,
  pagedListSchema,
  ServiceParams,
  Uuid,
} from '../schemas/common.ts';
import { Deployment } from '../schemas/deployments.ts';
import { deploymentView, originOf, success } from '../views.ts';

const DeployResponse = Envelope(
  Type.Union([
    Type.Object({ deployment_id: Uuid }),
    Type.Object({
      service_id: Uuid,
      service_name: Type.String({ maxLength: 200 }),
      origin: Type.String({ maxLength: 400 }),
      pr_number: Type.Integer(),
      is_new: Type.Boolean(),
    }),
  ]),
);

export const deploymentRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; reads: ReadCache }> = async (
  app,
  { deps, reads },
) => {
  app.post(
    '/environments/:envId/services/:serviceId/deploy',
    {
      config: { role: 'developer' },
      // The previews plan check needs the body's `preview` flag: it comes after the path's 404 (which is
      // answered before the body is read) and before the fields are validated.
      preValidation: async (request) => {
        // Not validated yet: the body may be any JSON value here, hence the optional chain.
        if (request.body?.preview === true) requireFeature(request, 'previews');
      },
      schema: {
        summary: 'Deploy Service',
        description:
          'Returns the deployment id at once (the row exists before the answer). Poll GET /v1/deployments/{id}. ' +
          'Deployments of one service run one at a time, in the order they were accepted. Preview mode ' +
          '({preview: true, commit_id, branch, pr_number}) needs the previews feature and returns the preview service.',
        params: ServiceParams,
        body: DeployRequestBody,
        response: { 200: DeployResponse, ...errorResponses(...AUTH_ERRORS, 422) },
      },
    },
    async (request) => {
      const service = serviceOf(request);
      const body = request.body;
      if (body.preview === true) {
        const identity = await liveIdentity(deps, environmentOf(request));
        const { preview, isNew } = await deployPreview(deps, actorOf(request), service, body);
        return success({
          service_id: preview.id,
          service_name: preview.name,
          origin: originOf(preview.subdomain, identity),
          pr_number: preview.pr_number as number,
          is_new: isNew,
        });
      }
      const deployment = await deploy(deps, actorOf(request), service, body);
      return success({ deployment_id: deployment.id });
    },
  );

  app.get(
    '/deployments/:deploymentId',
    {
      config: { role: 'viewer', etag: true, readCache: true },
      schema: {
        summary: 'Get Deployment',
        description:
          'Poll until state is success or failed (both terminal). op_ids and ops are always empty here.',
        params: Type.Object({ deploymentId: Uuid }),
        headers: WaitingHeaders,
        response: {
          ...conditionalResponses(Envelope(Type.Object({ deployment: Deployment }))),
          ...errorResponses(...AUTH_ERRORS),
        },
      },
    },
    (request, reply) => {
      const { deploymentId } = request.params;
      return cachedGet(reads, request, reply, {
        key: readKeys.deployment(authOf(request).accountId, deploymentId),
        tags: [changeTag('deployment', deploymentId)],
        load: async () => {
          request.scope = await loadScope(deps.store.db, request);
          const deployment = deploymentOf(request);
          return {
            payload: success({ deployment: deploymentView(deployment) }),
            immutable: TERMINAL_DEPLOYMENT_STATES.includes(deployment.state),
          };
        },
      });
    },
  );

  app.get(
    '/environments/:envId/services/:serviceId/deployments',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A service's deployments, newest first",
        params: ServiceParams,
        ...pagedListSchema('deployments', Deployment),
      },
    },
    async (request) => {
      const page = await listDeployments(deps.store.db, serviceOf(request).id, pageOf(request.query));
      return success({ deployments: page.items.map(deploymentView), next_cursor: nextCursor(page.next) });
    },
  );
};

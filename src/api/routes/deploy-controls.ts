import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { cancelDeployment, restart, rollback } from '../../domain/usecases/deploy-controls.ts';
import { actorOf } from '../plugins/auth.ts';
import { deploymentOf, serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, CLOSED, Envelope, errorResponses, ServiceParams, Uuid } from '../schemas/common.ts';
import { Deployment } from '../schemas/deployments.ts';
import { deploymentView, success } from '../views.ts';

const Note = Type.Optional(Type.String({ maxLength: 300 }));
const Accepted = Envelope(Type.Object({ deployment_id: Uuid }));

export const deployControlRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.post(
    '/deployments/:deploymentId/cancel',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Cancel Deployment',
        description:
          'A queued deployment ends failed with failure_reason `cancelled` at once and never runs. One in ' +
          'progress stops before traffic moves and then ends failed, reason `cancelled` (one that already moved ' +
          'traffic finishes). A terminal deployment is 409.',
        params: Type.Object({ deploymentId: Uuid }),
        body: Type.Object({}, CLOSED),
        response: {
          200: Envelope(Type.Object({ deployment: Deployment })),
          ...errorResponses(...AUTH_ERRORS, 409, 422),
        },
      },
    },
    async (request) =>
      success({
        deployment: deploymentView(await cancelDeployment(deps, actorOf(request), deploymentOf(request))),
      }),
  );

  app.post(
    '/environments/:envId/services/:serviceId/rollback',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Roll Back Service',
        description:
          "A new deployment of type `restore` with an earlier successful deployment's target (the commit, image " +
          'tag or chart it ran), ops.json and secrets as they were then. `deployment_id` names it; by default ' +
          'the last successful deployment before the one serving now. 409 when there is none.',
        params: ServiceParams,
        body: Type.Object({ deployment_id: Type.Optional(Uuid), note: Note }, CLOSED),
        response: { 200: Accepted, ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const deployment = await rollback(deps, actorOf(request), serviceOf(request), request.body);
      return success({ deployment_id: deployment.id });
    },
  );

  app.post(
    '/environments/:envId/services/:serviceId/restart',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Restart Service',
        description:
          'A new deployment (type `service_update`, note `Restart of <id>` by default) that replaces the replicas ' +
          'with the serving version (same target, ops.json and secrets), new ones healthy before the old ones go. ' +
          '409 when nothing has been deployed.',
        params: ServiceParams,
        body: Type.Object({ note: Note }, CLOSED),
        response: { 200: Accepted, ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const deployment = await restart(deps, actorOf(request), serviceOf(request), request.body);
      return success({ deployment_id: deployment.id });
    },
  );
};

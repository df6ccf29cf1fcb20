import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { withoutFields } from '../../domain/field-errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { IDENTITY_TTL_MS, liveIdentity } from '../../domain/usecases/environments.ts';
import { createService, deleteService, patchService } from '../../domain/usecases/services.ts';
import { changeTag } from '../../store/notifications.ts';
import { findCustomDomainsByIds } from '../../store/repositories/custom-domains.ts';
import { findDeploymentsByIds } from '../../store/repositories/deployments.ts';
import { findObservation, findObservations, NEVER_OBSERVED } from '../../store/repositories/observations.ts';
import { listServices } from '../../store/repositories/services.ts';
import type { ServiceRow } from '../../store/schema.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { actorOf, authOf } from '../plugins/auth.ts';
import { conditionalResponses, WaitingHeaders } from '../plugins/conditional-reads.ts';
import { ConditionalWriteHeaders, ifMatchCheck } from '../plugins/conditional-writes.ts';
import { attachedFieldErrors } from '../plugins/errors.ts';
import { environmentOf, loadScope, serviceOf } from '../plugins/scope.ts';
import { cachedGet, type ReadCache, readKeys } from '../read-cache.ts';
import {
  AUTH_ERRORS,
  Envelope,
  EnvIdParams,
  errorResponses,
  pagedListSchema,
  ServiceParams,
} from '../schemas/common.ts';
import { CreateServiceBody as CreateBodySchema, PatchServiceBody, Service } from '../schemas/services.ts';
import { serviceView, success } from '../views.ts';

const ServiceData = Envelope(Type.Object({ service: Service }));

/** What GET service sends; PATCH's If-Match is compared with its ETag. */
const ServiceRead = Envelope(
  Type.Object({
    service: Service,
    state: Type.String({ maxLength: 30 }),
    run_status: Type.String({ maxLength: 30 }),
    ready_count: Type.Integer(),
    svc_alias: Type.String({ maxLength: 300 }),
  }),
);

/** The body of GET service, from the row and what is read beside it (the path's scope, identity, observation). */
function serviceRead(
  request: FastifyRequest,
  service: ServiceRow,
  identity: Awaited<ReturnType<typeof liveIdentity>>,
  live: Awaited<ReturnType<typeof findObservation>>,
) {
  const view = serviceView(service, {
    identity,
    latestDeployment: request.scope.latestDeployment ?? null,
    activeDomain: request.scope.activeDomain ?? null,
    live,
  });
  return success({
    service: view,
    state: service.state,
    run_status: live.run_status,
    ready_count: live.ready_count,
    svc_alias: service.kube_svc_alias ?? '',
  });
}

export const serviceRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; reads: ReadCache }> = async (
  app,
  { deps, reads },
) => {
  app.post(
    '/environments/:envId/services',
    {
      config: { role: 'developer' },
      // Shape errors are reported together with the rules' (see createService), not on their own.
      attachValidation: true,
      schema: {
        summary: 'Create Service',
        description:
          "Rules: see the spec's Create Service table. Conditional requirements answer 422 with field errors; " +
          '`ops_json` with a source other than docker_image answers 500 `validation`; an environment that is not ' +
          '`available` answers 409. With `deploy_now` a first deployment is accepted in the same transaction ' +
          '(no deployment id is returned); if the provider refuses it at once the service is kept (`deploy_failed`, with a ' +
          'failed deployment whose failure_reason says why) and the answer is 500 `Service created successfully, but ' +
          'failed to deploy the service`, with the service id in the `x-berth-service-id` header.',
        params: EnvIdParams,
        body: CreateBodySchema,
        response: { 200: ServiceData, ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const environment = environmentOf(request);
      // Read before the change commits: a provider that cannot answer must not turn a done create into a 500.
      const identity = await liveIdentity(deps, environment);
      const shape = attachedFieldErrors(request);
      const body = withoutFields(request.body, shape);
      const row = await createService(deps, actorOf(request), environment, body, shape);
      return success({ service: serviceView(row, { identity, latestDeployment: null, activeDomain: null }) });
    },
  );

  app.get(
    '/environments/:envId/services',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'List services, newest first (deleted ones left out)',
        description:
          'Each item carries run_status and ready_count as the provider last reported them (as GET service does); ' +
          'the other hydrated fields (kube_svc_alias, namespace_name, ip_whitelist, ops_dependencies) only GET service.',
        params: EnvIdParams,
        ...pagedListSchema('services', Service),
      },
    },
    async (request) => {
      const environment = environmentOf(request);
      const page = await listServices(deps.store.db, environment.id, pageOf(request.query));
      const ids = (pick: (s: ServiceRow) => string | null) => page.items.flatMap((s) => pick(s) ?? []);
      const [identity, latest, domains, observed] = await Promise.all([
        liveIdentity(deps, environment),
        findDeploymentsByIds(
          deps.store.db,
          ids((s) => s.latest_deployment_id),
        ),
        findCustomDomainsByIds(
          deps.store.db,
          ids((s) => s.custom_domain_id),
        ),
        findObservations(
          deps.store.db,
          page.items.map((s) => s.id),
        ),
      ]);
      const deployments = new Map(latest.map((d) => [d.id, d]));
      const active = new Map(domains.filter((d) => d.state === 'deployed').map((d) => [d.id, d]));
      // The observed run status and ready replicas too (stored, one read for the page): a list such as
      // the console's needs no read per service.
      const services = page.items.map((s) => ({
        ...serviceView(s, {
          identity,
          latestDeployment: deployments.get(s.latest_deployment_id ?? '') ?? null,
          activeDomain: active.get(s.custom_domain_id ?? '') ?? null,
        }),
        ...(observed.get(s.id) ?? NEVER_OBSERVED),
      }));
      return success({ services, next_cursor: nextCursor(page.next) });
    },
  );

  app.get(
    '/environments/:envId/services/:serviceId',
    {
      config: { role: 'viewer', etag: true, readCache: true },
      schema: {
        summary: 'Get Service, hydrated',
        description:
          '`data.service` carries the hydrated fields and run_status / ready_count as the provider last reported them. For ' +
          'pollers of the hosted API, `data` also carries state, run_status, ready_count and svc_alias ' +
          '(= kube_svc_alias, empty until provisioned). Deleted services stay readable.',
        params: ServiceParams,
        headers: WaitingHeaders,
        response: { ...conditionalResponses(ServiceRead), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    (request, reply) => {
      const { envId, serviceId } = request.params;
      return cachedGet(reads, request, reply, {
        key: readKeys.service(authOf(request).accountId, envId, serviceId),
        tags: [changeTag('service', serviceId), changeTag('env', envId)],
        maxAgeMs: IDENTITY_TTL_MS,
        load: async () => {
          request.scope = await loadScope(deps.store.db, request);
          const environment = environmentOf(request);
          const service = serviceOf(request);
          const [identity, live] = await Promise.all([
            liveIdentity(deps, environment),
            findObservation(deps.store.db, service.id),
          ]);
          return { payload: serviceRead(request, service, identity, live) };
        },
      });
    },
  );

  app.patch(
    '/environments/:envId/services/:serviceId',
    {
      config: { role: 'developer' },
      attachValidation: true,
      schema: {
        summary: 'Update Service',
        description:
          'Any subset of the create fields except deploy_now and secrets; the merged result must pass the create rules ' +
          "(names may also hold hyphens). Changing `source` clears the old source's fields and requires the new " +
          "source's fields in the same request. Takes effect on the next deployment. With If-Match (the ETag of GET " +
          'service) the change is made only if the service is still as read, else 412 `conflict`.',
        params: ServiceParams,
        headers: ConditionalWriteHeaders,
        body: PatchServiceBody,
        response: { 200: ServiceData, ...errorResponses(...AUTH_ERRORS, 412, 422) },
      },
    },
    async (request, reply) => {
      const environment = environmentOf(request);
      const service = serviceOf(request);
      // Read before the transaction (the embedded database has one connection): the check only renders.
      const [identity, live] = await Promise.all([
        liveIdentity(deps, environment),
        findObservation(deps.store.db, service.id),
      ]);
      const check = ifMatchCheck(request, reply, ServiceRead, 'The service', (current: ServiceRow) =>
        serviceRead(request, current, identity, live),
      );
      const shape = attachedFieldErrors(request);
      const row = await patchService(
        deps,
        actorOf(request),
        service,
        withoutFields(request.body, shape),
        shape,
        check,
      );
      return success({
        service: serviceView(row, {
          identity,
          latestDeployment: request.scope.latestDeployment ?? null,
          activeDomain: request.scope.activeDomain ?? null,
        }),
      });
    },
  );

  app.delete(
    '/environments/:envId/services/:serviceId',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Delete Service (asynchronous; no envelope)',
        description:
          'Answers 202 {"message":"accepted"}. States: delete_pending -> delete_queued -> deleting -> deleted (or ' +
          'delete_failed). A protected service: 409. A service already being deleted: 403.',
        params: ServiceParams,
        response: {
          202: Type.Object({ message: Type.Literal('accepted') }),
          ...errorResponses(...AUTH_ERRORS, 409),
        },
      },
    },
    async (request, reply) => {
      await deleteService(deps, actorOf(request), serviceOf(request));
      return reply.status(202).send({ message: 'accepted' });
    },
  );
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { CustomDomainBody } from '../../domain/inputs.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import {
  addCustomDomain,
  domainPair,
  recordsOf,
  verifyCustomDomain,
} from '../../domain/usecases/custom-domains.ts';
import { IDENTITY_TTL_MS, liveIdentity } from '../../domain/usecases/environments.ts';
import { changeTag } from '../../store/notifications.ts';
import { findCertificate } from '../../store/repositories/certificates.ts';
import type { CustomDomainRow } from '../../store/schema.ts';
import { actorOf, authOf, requireFeature } from '../plugins/auth.ts';
import { conditionalResponses, WaitingHeaders } from '../plugins/conditional-reads.ts';
import { customDomainOf, environmentOf, loadScope, serviceOf } from '../plugins/scope.ts';
import { cachedGet, type ReadCache, readKeys } from '../read-cache.ts';
import { AUTH_ERRORS, Envelope, errorResponses, Nullable, ServiceParams, Uuid } from '../schemas/common.ts';
import { CustomDomain } from '../schemas/custom-domains.ts';
import { customDomainView, success } from '../views.ts';

const CustomDomainData = Envelope(Type.Object({ custom_domain: CustomDomain }));

/** The plan must include custom domains: checked with the token, before the path's resources (403 before 404). */
const needsCustomDomains = async (request: FastifyRequest) => requireFeature(request, 'custom_domains');

export const customDomainRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; reads: ReadCache }> = async (
  app,
  { deps, reads },
) => {
  const view = async (request: FastifyRequest, domain: CustomDomainRow) =>
    customDomainView(
      domain,
      await recordsOf(deps, environmentOf(request), domain),
      await findCertificate(deps.store.db, domain.id),
    );

  app.post(
    '/environments/:envId/services/:serviceId/custom-domains',
    {
      config: { role: 'admin' },
      onRequest: needsCustomDomains,
      schema: {
        summary: 'Add Custom Domain',
        description:
          'Registers a fully qualified domain (lower-cased) in state `unverified`, with the DNS records to create: a ' +
          '`verify_acm` CNAME and a `route_app_traffic` record (CNAME to the ingress host on AWS, an A record to the ' +
          'ingress address on GCP). A domain held by any account: 409. Next: create the records, then call verify.',
        params: ServiceParams,
        body: CustomDomainBody,
        response: { 200: CustomDomainData, ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      // The records need the live identity: read it before the domain is stored.
      await liveIdentity(deps, environmentOf(request));
      const domain = await addCustomDomain(deps, actorOf(request), serviceOf(request), request.body);
      return success({ custom_domain: await view(request, domain) });
    },
  );

  app.get(
    '/environments/:envId/services/:serviceId/custom-domains',
    {
      onRequest: needsCustomDomains,
      config: { role: 'viewer', etag: true, readCache: true },
      schema: {
        summary: "The service's active and pending custom domains",
        description:
          '`active_domain` is the domain now serving the service (or null); `pending_domain` the newest one not serving ' +
          'yet (unverified, verified, being deployed, or failed to deploy), or null.',
        params: ServiceParams,
        headers: WaitingHeaders,
        response: {
          ...conditionalResponses(
            Envelope(
              Type.Object({
                custom_domain: Type.Object({
                  is_active: Type.Boolean(),
                  is_pending: Type.Boolean(),
                  active_domain: Nullable(CustomDomain),
                  pending_domain: Nullable(CustomDomain),
                }),
              }),
            ),
          ),
          ...errorResponses(...AUTH_ERRORS),
        },
      },
    },
    (request, reply) => {
      const { envId, serviceId } = request.params;
      return cachedGet(reads, request, reply, {
        key: readKeys.customDomains(authOf(request).accountId, envId, serviceId),
        tags: [changeTag('service', serviceId), changeTag('env', envId)],
        maxAgeMs: IDENTITY_TTL_MS,
        load: async () => {
          request.scope = await loadScope(deps.store.db, request);
          const { active, pending } = await domainPair(deps, serviceOf(request));
          return {
            payload: success({
              custom_domain: {
                is_active: active !== null,
                is_pending: pending !== null,
                active_domain: active ? await view(request, active) : null,
                pending_domain: pending ? await view(request, pending) : null,
              },
            }),
          };
        },
      });
    },
  );

  app.post(
    '/environments/:envId/services/:serviceId/custom-domains/:customDomainId/verify',
    {
      config: { role: 'admin' },
      onRequest: needsCustomDomains,
      schema: {
        summary: 'Verify Custom Domain',
        description:
          'Resolves every record through the configured DNS servers (BERTH_DNS_SERVERS). Any record missing or wrong: ' +
          '422 `DOMAIN_VERIFICATION_FAILED`, with `errors` naming each failing record_name and what was found. All ' +
          'good: 200 with the domain `verified`; the cut-over (deploy_queued -> deploying -> deployed) is asynchronous, ' +
          "after which the domain is the service's origin and the domain it replaces is retired. The body is optional.",
        params: Type.Object({ envId: Uuid, serviceId: Uuid, customDomainId: Uuid }),
        response: { 200: CustomDomainData, ...errorResponses(...AUTH_ERRORS, 409, 422) },
      },
    },
    async (request) => {
      const domain = await verifyCustomDomain(
        deps,
        actorOf(request),
        serviceOf(request),
        environmentOf(request),
        customDomainOf(request),
      );
      return success({ custom_domain: await view(request, domain) });
    },
  );
};

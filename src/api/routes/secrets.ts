import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { StoredSecret } from '../../domain/secret-rules.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { getSecrets, putSecrets, type SecretScope } from '../../domain/usecases/secrets.ts';
import { actorOf, authOf } from '../plugins/auth.ts';
import { ConditionalHeaders, conditionalResponses } from '../plugins/conditional-reads.ts';
import { ConditionalWriteHeaders, ifMatchCheck } from '../plugins/conditional-writes.ts';
import { environmentOf, serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, EnvIdParams, errorResponses, ServiceParams } from '../schemas/common.ts';
import { SecretsBody, SecretsData } from '../schemas/secrets.ts';
import { secretView, success } from '../views.ts';

const IF_MATCH_NOTE =
  'With If-Match (the ETag of the matching GET), the replace happens only if the secrets are still what was read, ' +
  'else 412 `conflict`: a read-modify-write that never wipes a key another writer changed in between.';

const PUT_DESCRIPTION =
  'A full replace, not a merge: keys left out are removed. Everything is validated before anything is written. ' +
  'Sensitive values are write-only: reads leave them out, and an entry for a stored sensitive key without `value` ' +
  'keeps the stored value. Stored at once; written to the provider asynchronously; rolled out by the next deployment.';

function serviceScope(request: FastifyRequest): SecretScope {
  const service = serviceOf(request);
  return {
    scope: 'service',
    id: service.id,
    environmentId: service.environment_id,
    accountId: service.account_id,
  };
}

function environmentScope(request: FastifyRequest): SecretScope {
  const env = environmentOf(request);
  return { scope: 'environment', id: env.id, environmentId: env.id, accountId: env.account_id };
}

/** What GET .../secrets sends; PUT's If-Match is compared with its ETag. */
const SecretsRead = Envelope(SecretsData);
const secretsBody = (secrets: StoredSecret[], withValues = true) => ({
  message: 'success' as const,
  data: { secrets: secrets.map((s) => secretView(s, withValues)) },
});

export const secretRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const read = (scopeOf: (r: FastifyRequest) => SecretScope) => async (request: FastifyRequest) => {
    // A viewer reads every secret's key and settings, never a value (docs/access.md).
    return secretsBody(await getSecrets(deps, scopeOf(request)), authOf(request).role !== 'viewer');
  };

  app.get(
    '/environments/:envId/services/:serviceId/secrets',
    {
      config: { role: 'viewer', etag: true },
      schema: {
        summary: "Read a service's secrets, sorted by key",
        description: 'A viewer gets no value, as for sensitive secrets.',
        params: ServiceParams,
        headers: ConditionalHeaders,
        response: { ...conditionalResponses(SecretsRead), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    read(serviceScope),
  );

  app.put(
    '/environments/:envId/services/:serviceId/secrets',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Replace Service Secrets',
        description: `${PUT_DESCRIPTION} ${IF_MATCH_NOTE}`,
        params: ServiceParams,
        headers: ConditionalWriteHeaders,
        body: SecretsBody,
        response: { 200: Envelope(SecretsData), ...errorResponses(...AUTH_ERRORS, 412, 422) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const target = serviceScope(request);
      const check = ifMatchCheck(request, reply, SecretsRead, "The service's secrets", secretsBody);
      // Shape and key rules first (422), then the service's state (403), then If-Match (412).
      const stored = await putSecrets(deps, actorOf(request), target, body.secrets, check);
      return success({ secrets: stored.map((s) => secretView(s)) });
    },
  );

  app.get(
    '/environments/:envId/secrets',
    {
      config: { role: 'viewer', etag: true },
      schema: {
        summary: "Read an environment's secrets (shared by all its services), sorted by key",
        description: 'A viewer gets no value, as for sensitive secrets.',
        params: EnvIdParams,
        headers: ConditionalHeaders,
        response: { ...conditionalResponses(SecretsRead), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    read(environmentScope),
  );

  app.put(
    '/environments/:envId/secrets',
    {
      config: { role: 'developer' },
      schema: {
        summary: 'Replace Environment Secrets',
        description: `${PUT_DESCRIPTION} A service's own key wins over the environment's. ${IF_MATCH_NOTE}`,
        params: EnvIdParams,
        headers: ConditionalWriteHeaders,
        body: SecretsBody,
        response: { 200: Envelope(SecretsData), ...errorResponses(...AUTH_ERRORS, 412, 422) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const check = ifMatchCheck(request, reply, SecretsRead, "The environment's secrets", secretsBody);
      const stored = await putSecrets(deps, actorOf(request), environmentScope(request), body.secrets, check);
      return success({ secrets: stored.map((s) => secretView(s)) });
    },
  );
};

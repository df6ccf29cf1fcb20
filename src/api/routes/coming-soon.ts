import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { NotFoundError } from '../../domain/errors.ts';
import type { Role } from '../../domain/roles.ts';
import { errorResponses } from '../schemas/common.ts';

/**
 * Published but not live (spec: "coming soon"): each answers 404 `notfound` today, after the usual
 * token check, like any unknown resource.
 */
const COMING_SOON: [method: 'POST' | 'DELETE' | 'GET', path: string, what: string, role: Role][] = [
  ['POST', '/environments', 'Create environment', 'admin'],
  ['DELETE', '/environments/:envId', 'Delete environment', 'admin'],
  [
    'DELETE',
    '/environments/:envId/services/:serviceId/custom-domains/:customDomainId',
    'Delete custom domain',
    'admin',
  ],
];

async function notLiveYet(): Promise<never> {
  throw new NotFoundError('Route');
}

export const comingSoonRoutes: FastifyPluginAsyncTypebox = async (app) => {
  for (const [method, url, what, role] of COMING_SOON) {
    app.route({
      method,
      url,
      config: { role },
      schema: { summary: `${what} (coming soon: 404 today)`, response: errorResponses(401, 403, 404, 429) },
      // Answered before the path's resources are loaded or a body is read.
      onRequest: notLiveYet,
      handler: notLiveYet,
    });
  }
};

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { ping } from '../../store/migrate.ts';

const Health = Type.Object({ message: Type.String({ maxLength: 20 }) });

/** Liveness without auth or envelope: 200 `ok`, or 503 `unavailable` when the database does not answer. */
export const healthRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/health',
    { schema: { security: [], response: { 200: Health, 503: Health } } },
    async (_request, reply) =>
      (await ping(deps.store.db)) ? { message: 'ok' } : reply.status(503).send({ message: 'unavailable' }),
  );
};

import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { ping } from '../../store/migrate.ts';

const Health = Type.Object({ message: Type.String({ maxLength: 20 }) });

/** Liveness without auth or envelope: 200 `ok`, or 503 `unavailable` when the database does not answer. */
export async function healthRoutes(app: FastifyInstance, { deps }: { deps: Deps }) {
  app.get(
    '/health',
    { schema: { security: [], response: { 200: Health, 503: Health } } },
    async (_request, reply) =>
      (await ping(deps.store.db)) ? { message: 'ok' } : reply.status(503).send({ message: 'unavailable' }),
  );
}

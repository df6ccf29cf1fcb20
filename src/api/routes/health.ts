import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { pendingMigrations, ping } from '../../store/migrate.ts';

const Health = Type.Object({ message: Type.String({ maxLength: 20 }) });

const Check = Type.Union([Type.Literal('ok'), Type.Literal('failed'), Type.Literal('not_run_here')]);
const Readiness = Type.Object({
  message: Type.String({ maxLength: 200 }),
  checks: Type.Object({ database: Check, migrations: Check, worker: Check }),
});

export interface HealthOptions {
  deps: Deps;
  /** Whether this process's worker loop runs; absent: no workers run in this process. */
  workerAlive?: (() => boolean) | undefined;
}

/**
 * `/health` is liveness without auth or envelope: 200 `ok`, or 503 `unavailable` when the database does
 * not answer. `/ready` is readiness for load balancers and orchestrators (docs/metrics.md): the database
 * answers, its migrations are those this build has, and the worker loop runs when this process runs one;
 * 503 names the checks that failed.
 */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthOptions> = async (app, { deps, workerAlive }) => {
  app.get(
    '/health',
    { schema: { security: [], response: { 200: Health, 503: Health } } },
    async (_request, reply) =>
      (await ping(deps.store.db)) ? { message: 'ok' } : reply.status(503).send({ message: 'unavailable' }),
  );
  app.get(
    '/ready',
    { schema: { security: [], response: { 200: Readiness, 503: Readiness } } },
    async (_request, reply) => {
      const database = (await ping(deps.store.db)) ? 'ok' : 'failed';
      const pending = database === 'ok' ? await pendingMigrations(deps.store.db).catch(() => null) : null;
      const migrations = pending?.length === 0 ? 'ok' : 'failed';
      const worker = !workerAlive ? 'not_run_here' : workerAlive() ? 'ok' : 'failed';
      const failed: string[] = [];
      if (database === 'failed') failed.push('the database does not answer');
      if (migrations === 'failed')
        failed.push(pending ? `migrations not run: ${pending.join(', ')}` : 'migrations unknown');
      if (worker === 'failed') failed.push('the worker loop is not running');
      const checks = { database, migrations, worker } as const;
      if (failed.length === 0) return { message: 'ready', checks };
      return reply.status(503).send({ message: `not ready: ${failed.join('; ')}`.slice(0, 200), checks });
    },
  );
};

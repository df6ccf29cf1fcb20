import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { serviceLogs } from '../../domain/usecases/logs.ts';
import { serviceOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, errorResponses, ServiceParams } from '../schemas/common.ts';
import { JsonOrStream, LogLine, MAX_TAIL, ServiceLogQuery } from '../schemas/logs.ts';
import { openSse } from '../sse.ts';
import { success } from '../views.ts';

export const logRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/environments/:envId/services/:serviceId/logs',
    {
      config: { role: 'developer' },
      schema: {
        summary: "A service's output",
        description:
          'The lines its replicas, job runs and cron runs printed, oldest first, each with its time, replica and ' +
          'stream; secret values are masked. `tail` (default 100) of the newest, from `since` on. With ' +
          '`follow=true` the answer is a server-sent events stream: those lines, then each new one as printed ' +
          '(event `line`, data a line object), until the client disconnects.',
        params: ServiceParams,
        querystring: ServiceLogQuery,
        response: {
          200: JsonOrStream(
            Envelope(Type.Object({ lines: Type.Array(LogLine, { maxItems: MAX_TAIL }) })),
            'server-sent events: `event: line`, `data:` one log line as JSON',
          ),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request, reply) => {
      const { since, tail = 100, follow = false } = request.query;
      const service = serviceOf(request);
      if (!follow) {
        const lines = [];
        const query = {
          since: since ? new Date(since) : undefined,
          tail,
          follow,
          signal: request.raw.signal,
        };
        for await (const line of serviceLogs(deps, service, query)) lines.push(line);
        return success({ lines });
      }
      const stream = openSse(request, reply);
      const query = { since: since ? new Date(since) : undefined, tail, follow, signal: stream.closed };
      try {
        for await (const line of serviceLogs(deps, service, query)) await stream.send('line', line);
      } finally {
        stream.end();
      }
      return reply;
    },
  );
};

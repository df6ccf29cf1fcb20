import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ValidationError } from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { eventsPrunedThrough, latestEventSeq } from '../../store/repositories/events.ts';
import { EventReads } from '../event-reads.ts';
import { authOf } from '../plugins/auth.ts';
import { AUTH_ERRORS, errorResponses, isSeq } from '../schemas/common.ts';
import { Event, EventsExpired, EventsQuery } from '../schemas/events.ts';
import { openSse } from '../sse.ts';
import { eventView } from '../views.ts';

/** A stream that heard nothing reads anyway this often (a NOTIFY lost with its connection). */
const POLL_MS = 5_000;
/** Events a stream reads per query. */
const BATCH = 500;

/** Where to resume: the query's `last_event_id`, else the Last-Event-ID header an EventSource sends. */
function resumeAfter(query: string | undefined, header: string | string[] | undefined): string | undefined {
  if (query !== undefined) return query;
  if (header === undefined) return undefined;
  const value = String(header);
  if (!isSeq(value)) {
    throw ValidationError.fields([{ field: 'Last-Event-ID', error: 'Last-Event-ID must be an event id' }]);
  }
  return value;
}

export const eventRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const db = deps.store.db;
  const notifications = deps.store.notifications;
  const reads = new EventReads(db, deps.secretBox);

  app.get(
    '/events',
    {
      config: { role: 'viewer', wholeAccount: true },
      schema: {
        summary: "The account's state changes, live",
        description:
          "A server-sent events stream of every change to the account's deployments, services, custom domains " +
          'and dependencies, and every secret write (never a value), as each commits, in order. Each frame: ' +
          '`id:` the event id, `event:` its type, `data:` the Event (docs/events.md). Without Last-Event-ID it ' +
          'starts with the next change; with it (header, or `last_event_id`) it resumes right after that event, ' +
          'nothing lost or repeated. Events are kept BERTH_EVENT_RETENTION_HOURS (72 by default); a Last-Event-ID ' +
          'older than that gets one `expired` event first, then the stream goes on from the oldest event kept. ' +
          'A `: keep-alive` comment comes every 15 s.',
        querystring: EventsQuery,
        response: {
          200: {
            description:
              'text/event-stream: `event: <type>` frames whose data is an Event; `expired` first when resuming past retention',
            content: {
              'text/event-stream': { schema: Type.Union([Event, EventsExpired]) },
            },
          },
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request, reply) => {
      const accountId = authOf(request).accountId;
      const resume = resumeAfter(request.query.last_event_id, request.headers['last-event-id']);
      let cursor = resume ?? (await latestEventSeq(db, accountId));
      const stream = openSse(request, reply);
      try {
        if (resume !== undefined) {
          const pruned = await eventsPrunedThrough(db);
          if (BigInt(resume) < BigInt(pruned)) {
            await stream.send('expired', {
              last_event_id: resume,
              oldest_event_id: pruned,
              message: `events up to ${pruned} are past retention and gone: read the state again, then follow from here`,
            });
            cursor = pruned;
          }
        }
        while (!stream.closed.aborted) {
          // Armed before the read: a commit between the read and the wait still wakes it.
          const { woken: wake } = await notifications.arm([['events', accountId]], POLL_MS, stream.closed);
          const rows = await reads.after(accountId, cursor, BATCH);
          for (const row of rows) {
            if (stream.closed.aborted) break;
            await stream.send(row.type, eventView(row), String(row.seq));
            cursor = String(row.seq);
          }
          if (rows.length < BATCH) await wake;
        }
      } finally {
        stream.end();
      }
      return reply;
    },
  );
};

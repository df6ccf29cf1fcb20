import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { DEPLOY_STEPS, TIMELINE_MARKS } from '../../domain/deployment-states.ts';
import { ValidationError } from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { changeTag } from '../../store/notifications.ts';
import {
  deploymentLogAfter,
  deploymentOperations,
  deploymentTimeline,
} from '../../store/repositories/deployment-logs.ts';
import { findDeploymentById } from '../../store/repositories/deployments.ts';
import { deploymentOf } from '../plugins/scope.ts';
import { AUTH_ERRORS, Envelope, errorResponses, isSeq, NoQuery, Nullable, Uuid } from '../schemas/common.ts';
import { Deployment } from '../schemas/deployments.ts';
import {
  DeploymentLogLine,
  DeploymentLogQuery,
  JsonOrStream,
  Operation,
  TimelineEntry,
} from '../schemas/logs.ts';
import { openSse } from '../sse.ts';
import { deploymentLogLineView, deploymentView, operationView, success, timelineView } from '../views.ts';

/** A follower that heard nothing re-reads this often anyway (a NOTIFY lost with its connection). */
const FOLLOW_POLL_MS = 5_000;
/** Lines a follower reads per query. */
const FOLLOW_BATCH = 500;

const isTerminal = (state: string) => state === 'success' || state === 'failed';

/** Where to read on from: `cursor`, else the Last-Event-ID an EventSource sends when it reconnects. */
function startCursor(cursor: string | undefined, lastEventId: string | string[] | undefined): string | null {
  if (cursor !== undefined) return cursor;
  if (lastEventId === undefined) return null;
  const value = String(lastEventId);
  if (!isSeq(value)) {
    throw ValidationError.fields([{ field: 'Last-Event-ID', error: 'Last-Event-ID must be a line cursor' }]);
  }
  return value;
}

export const deploymentLogRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const db = deps.store.db;
  const notifications = deps.store.notifications;

  app.get(
    '/deployments/:deploymentId/logs',
    {
      config: { role: 'developer' },
      schema: {
        summary: "A deployment's log",
        description:
          'What happened to the deployment, oldest first: accepted, queued, source resolved, build or pull ' +
          'output, replicas created, healthy or failed with their output, traffic moved, the outcome. Bounded ' +
          '(a marker line counts the oldest lines dropped). `cursor` reads on after a line. With `follow=true` ' +
          'a server-sent events stream: `line` events (id: the cursor) until the deployment is terminal, then ' +
          'one `end` event with the deployment; a reconnect resumes after Last-Event-ID.',
        params: Type.Object({ deploymentId: Uuid }),
        querystring: DeploymentLogQuery,
        response: {
          200: JsonOrStream(
            Envelope(
              Type.Object({
                lines: Type.Array(DeploymentLogLine, { maxItems: 2000 }),
                next_cursor: Nullable(Type.String({ maxLength: 19 })),
                deployment: Deployment,
              }),
            ),
            'server-sent events: `line` (id: cursor, data: a line), then `end` (data: {deployment})',
          ),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request, reply) => {
      const deployment = deploymentOf(request);
      const { limit = 1000, follow = false } = request.query;
      let cursor = startCursor(request.query.cursor, request.headers['last-event-id']);
      if (!follow) {
        const lines = await deploymentLogAfter(db, deployment.id, cursor, limit);
        return success({
          lines: lines.map(deploymentLogLineView),
          next_cursor: lines.length > 0 ? String(lines.at(-1)?.seq) : cursor,
          deployment: deploymentView(deployment),
        });
      }
      const stream = openSse(request, reply);
      try {
        while (!stream.closed.aborted) {
          // A new line wakes the follower, and so does the deployment's own change: the outcome can
          // commit after its last line, and waiting for the fallback read would hold `end` for seconds.
          const { woken: wake } = await notifications.arm(
            [
              ['logs', deployment.id],
              ['changes', changeTag('deployment', deployment.id)],
            ],
            FOLLOW_POLL_MS,
            stream.closed,
          );
          // The state first: lines written before it turned terminal are all readable below.
          const now = await findDeploymentById(db, deployment.id);
          let lines = await deploymentLogAfter(db, deployment.id, cursor, FOLLOW_BATCH);
          while (lines.length > 0 && !stream.closed.aborted) {
            for (const line of lines)
              await stream.send('line', deploymentLogLineView(line), String(line.seq));
            cursor = String(lines.at(-1)?.seq ?? cursor);
            lines =
              lines.length < FOLLOW_BATCH
                ? []
                : await deploymentLogAfter(db, deployment.id, cursor, FOLLOW_BATCH);
          }
          if (!now || isTerminal(now.state)) {
            await stream.send('end', { deployment: deploymentView(now ?? deployment) });
            break;
          }
          await wake;
        }
      } finally {
        stream.end();
      }
      return reply;
    },
  );

  app.get(
    '/deployments/:deploymentId/operations',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "A deployment's operations",
        description:
          'The steps the deployment went through, in order (accept, queue, source, build or pull, dependencies, ' +
          'rollout, traffic, drain, outcome), each with its state (running, success, failed) and timing; and ' +
          'its timeline: when it was accepted, claimed by a worker, its image resolved, its first container ' +
          'created and started, first healthy, routed, succeeded or failed, and its old version stopped, in ' +
          'the order they happened, with millisecond timestamps.',
        params: Type.Object({ deploymentId: Uuid }),
        querystring: NoQuery,
        response: {
          200: Envelope(
            Type.Object({
              operations: Type.Array(Operation, { maxItems: DEPLOY_STEPS.length }),
              timeline: Type.Array(TimelineEntry, { maxItems: TIMELINE_MARKS.length }),
            }),
          ),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const { id } = deploymentOf(request);
      const [rows, timeline] = await Promise.all([deploymentOperations(db, id), deploymentTimeline(db, id)]);
      rows.sort((a, b) => DEPLOY_STEPS.indexOf(a.step) - DEPLOY_STEPS.indexOf(b.step));
      return success({ operations: rows.map(operationView), timeline: timelineView(timeline) });
    },
  );
};

import { Type } from 'typebox';
import { DEPLOY_STEPS, OPERATION_STATES, TIMELINE_MARKS } from '../../domain/deployment-states.ts';
import { DateTime, Nullable, Seq, StringEnum } from './common.ts';

export const MAX_TAIL = 10_000;

export const LogLine = Type.Object({
  time: DateTime,
  replica: Type.String({ maxLength: 200, description: 'the replica (container) or run that printed it' }),
  stream: StringEnum(['stdout', 'stderr'] as const, { maxLength: 10 }),
  line: Type.String({ maxLength: 65_536 }),
});

export const ServiceLogQuery = Type.Object(
  {
    since: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 40,
        description: 'only lines printed at or after this time',
      }),
    ),
    tail: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TAIL,
        default: 100,
        description: 'the newest lines printed before the call',
      }),
    ),
    follow: Type.Optional(
      Type.Boolean({ default: false, description: 'stream new lines as server-sent events (docs/api.md)' }),
    ),
  },
  { additionalProperties: false },
);

/** A 200 that is JSON, or with `follow=true` a server-sent events stream. */
export function JsonOrStream<T extends object>(json: T, stream: string) {
  return {
    description: 'JSON; with follow=true, text/event-stream',
    content: {
      'application/json': { schema: json },
      'text/event-stream': { schema: Type.String({ description: stream }) },
    },
  };
}

export const DeploymentLogLine = Type.Object({
  cursor: Type.String({
    maxLength: 19,
    description: 'pass back as `cursor` (or Last-Event-ID) to read on after it',
  }),
  time: DateTime,
  step: StringEnum(DEPLOY_STEPS, { maxLength: 20 }),
  line: Type.String({ maxLength: 4000 }),
  dropped: Nullable(
    Type.Integer({
      description: 'on the marker line only: how many older lines were dropped (the log is bounded)',
    }),
  ),
});

export const DeploymentLogQuery = Type.Object(
  {
    cursor: Type.Optional(Seq("read the lines after this one (a line's `cursor`)")),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 2000, default: 1000 })),
    follow: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'stream the lines as server-sent events until the deployment is terminal',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Operation = Type.Object({
  step: StringEnum(DEPLOY_STEPS, { maxLength: 20 }),
  state: StringEnum(OPERATION_STATES, { maxLength: 20 }),
  detail: Type.String({ maxLength: 4000 }),
  started_at: DateTime,
  finished_at: Nullable(DateTime),
  duration_ms: Nullable(Type.Integer({ minimum: 0 })),
});

/** One moment of a deployment's timeline; `elapsed_ms` counts from `accepted`. */
export const TimelineEntry = Type.Object({
  mark: StringEnum(TIMELINE_MARKS, { maxLength: 20 }),
  at: DateTime,
  elapsed_ms: Type.Integer({ minimum: 0 }),
});

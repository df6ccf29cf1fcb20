import { Type } from 'typebox';
import { DateTime, StringEnum } from './common.ts';

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

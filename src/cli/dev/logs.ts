import { styleText } from 'node:util';
import type { Command } from 'commander';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import type { Session } from './session.ts';
import { yaml } from './yaml.ts';

type LogsPath = paths['/v1/environments/{envId}/services/{serviceId}/logs']['get'];
type LogLine = LogsPath['responses'][200]['content']['application/json']['data']['lines'][number];

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new CliError(`--tail takes a whole number of at least 1 (got "${value}")`, EXIT.usage);
  return n;
}

/** One line as a person reads it (time and replica dimmed on a terminal), or as JSON / YAML for scripts. */
function printer(session: Session): (line: LogLine) => void {
  const format = session.out.format;
  return (line) => {
    if (format === 'json') process.stdout.write(`${JSON.stringify(line)}\n`);
    else if (format === 'yaml') process.stdout.write(`---\n${yaml().stringify(line)}`);
    else process.stdout.write(`${styleText('dim', `${line.time} ${line.replica}`)} ${line.line}\n`);
  };
}

/** The events of a server-sent events body (text/event-stream), as they arrive. */
export function sseEvents(body: ReadableStream<Uint8Array>) {
  return body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
}

/** Follows the server-sent events stream, printing each `line` event as it comes, until it ends. */
async function follow(
  session: Session,
  path: { envId: string; serviceId: string },
  query: LogsPath['parameters']['query'],
) {
  const result = await session.api.GET('/v1/environments/{envId}/services/{serviceId}/logs', {
    params: { path, query: { ...query, follow: true } },
    headers: { accept: 'text/event-stream' },
    parseAs: 'stream',
  });
  if (!result.response.ok || !result.data) {
    throw new ApiError(result.response.status, await result.response.json().catch(() => ({})));
  }
  const print = printer(session);
  for await (const event of sseEvents(result.data as ReadableStream<Uint8Array>)) {
    if (event.event === 'line') print(JSON.parse(event.data) as LogLine);
  }
}

export function logCommands(program: Command): void {
  withExamples(
    common(
      program
        .command('logs <service>')
        .description("a service's output (secret values masked); -f keeps printing new lines")
        .option('-f, --follow', 'keep printing new lines as they are printed (Ctrl-C to stop)')
        .option('--tail <n>', 'how many of the newest lines to start with (default 100)', positive)
        .option('--since <time>', 'only lines printed from this ISO 8601 time on'),
    ),
    'logs "hello web" -f',
    'logs "hello web" --tail 20 -o json',
  ).action(
    withSession<[string], { follow?: boolean; tail?: number; since?: string }>(
      async (session, [reference], options) => {
        const { env, service } = await session.service(reference);
        const path = { envId: env.id, serviceId: service.id };
        const query = { tail: options.tail, since: options.since };
        if (options.follow) return follow(session, path, query);
        const data = unwrap(
          await session.api.GET('/v1/environments/{envId}/services/{serviceId}/logs', {
            params: { path, query },
          }),
        );
        // Without follow the answer is JSON (the string is the event stream's type).
        if (typeof data === 'string') throw new CliError('the API answered an event stream', EXIT.unexpected);
        if (session.out.format !== 'table') return session.out.item(data, undefined, data);
        const print = printer(session);
        for (const line of data.lines) print(line);
      },
    ),
  );
}

import { styleText } from 'node:util';
import type { Command } from 'commander';
import YAML from 'yaml';
import { ApiError } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { sseEvents } from './logs.ts';
import type { Session } from './session.ts';

interface Event {
  id: string;
  type: string;
  timestamp: string;
  data: { id?: string; key?: string; name?: string; domain?: string; state?: string };
}

/** One event as a person reads it: id, time, type, what it is about and its state; JSON / YAML for scripts. */
function print(session: Session, name: string, event: Event): void {
  const format = session.out.format;
  if (format === 'json') return void process.stdout.write(`${JSON.stringify(event)}\n`);
  if (format === 'yaml') return void process.stdout.write(`---\n${YAML.stringify(event)}`);
  if (name === 'expired') {
    return void process.stdout.write(
      `${styleText('yellow', 'events were dropped by retention: read the state again')}\n`,
    );
  }
  const about = event.data.name ?? event.data.domain ?? event.data.key ?? event.data.id ?? '';
  const state = event.data.state ? ` ${event.data.state}` : '';
  process.stdout.write(
    `${styleText('dim', `${event.id} ${event.timestamp}`)} ${event.type} ${about}${state}\n`,
  );
}

export function eventCommands(program: Command): void {
  withExamples(
    common(
      program
        .command('events')
        .description("follow the account's changes as they happen (deployments, services, domains, secrets)")
        .option('--after <id>', 'start right after this event id (0: from the oldest kept)'),
    ),
    'events',
    'events --after 0 -o json',
  ).action(
    withSession<[], { after?: string }>(async (session, _args, options) => {
      if (options.after !== undefined && !/^[0-9]{1,19}$/.test(options.after)) {
        throw new CliError(`--after takes an event id, a whole number (got "${options.after}")`, EXIT.usage);
      }
      const result = await session.api.GET('/v1/events', {
        params: { query: { last_event_id: options.after } },
        headers: { accept: 'text/event-stream' },
        parseAs: 'stream',
      });
      if (!result.response.ok || !result.data) {
        throw new ApiError(result.response.status, await result.response.json().catch(() => ({})));
      }
      for await (const event of sseEvents(result.data as ReadableStream<Uint8Array>)) {
        print(session, event.event ?? '', JSON.parse(event.data) as Event);
      }
    }),
  );
}

import { styleText } from 'node:util';
import type { Command } from 'commander';
import { type AccountEvent, events } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import type { Session } from './session.ts';
import { yaml } from './yaml.ts';

/** One event as a person reads it: id, time, type, what it is about and its state; JSON / YAML for scripts. */
function print(session: Session, event: AccountEvent): void {
  const format = session.out.format;
  if (format === 'json') return void process.stdout.write(`${JSON.stringify(event)}\n`);
  if (format === 'yaml') return void process.stdout.write(`---\n${yaml().stringify(event)}`);
  if (!('type' in event)) {
    return void process.stdout.write(
      `${styleText('yellow', 'events were dropped by retention: read the state again')}\n`,
    );
  }
  const data: { id?: string; key?: string; name?: string; domain?: string; state?: string } = event.data;
  const about = data.name ?? data.domain ?? data.key ?? data.id ?? '';
  const state = data.state ? ` ${data.state}` : '';
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
      for await (const event of events(session.api, { after: options.after })) print(session, event);
    }),
  );
}

import { styleText } from 'node:util';
import type { Command } from 'commander';
import { followServiceLogs, type ServiceLogLine, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import type { Session } from './session.ts';
import { yaml } from './yaml.ts';

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new CliError(`--tail takes a whole number of at least 1 (got "${value}")`, EXIT.usage);
  return n;
}

/** One line as a person reads it (time and replica dimmed on a terminal), or as JSON / YAML for scripts. */
function printer(session: Session): (line: ServiceLogLine) => void {
  const format = session.out.format;
  return (line) => {
    if (format === 'json') process.stdout.write(`${JSON.stringify(line)}\n`);
    else if (format === 'yaml') process.stdout.write(`---\n${yaml().stringify(line)}`);
    else process.stdout.write(`${styleText('dim', `${line.time} ${line.replica}`)} ${line.line}\n`);
  };
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
        if (options.follow) {
          const print = printer(session);
          for await (const line of followServiceLogs(session.api, path, query)) print(line);
          return;
        }
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

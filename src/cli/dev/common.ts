import { type Command, Option } from 'commander';
import { FORMATS } from './output.ts';
import { type CommonOptions, Session } from './session.ts';

/** The options every developer command takes: where to print, which context, which environment. */
export function common(command: Command, options: { env?: boolean } = {}): Command {
  command
    .addOption(
      new Option('-o, --output <format>', 'how to print: table (default), json or yaml').choices(FORMATS),
    )
    .option('--context <name>', 'the login context to use (default BERTH_CONTEXT, else the current one)');
  if (options.env !== false) {
    command.option(
      '-e, --env <env>',
      "environment name or id (default BERTH_ENV, the context's, or the only one)",
    );
  }
  return command;
}

/**
 * A command's action: its arguments as commander passed them (a variadic one is an array), its options,
 * and a Session built from them.
 */
export function withSession<A extends unknown[] = string[], T = object>(
  work: (session: Session, args: A, options: T & CommonOptions) => Promise<void>,
): (...params: unknown[]) => Promise<void> {
  return async (...params) => {
    const command = params[params.length - 1] as Command;
    const options = command.opts<T & CommonOptions>();
    await work(new Session(options), params.slice(0, -2) as A, options);
  };
}

import { type Command, Option } from 'commander';
import { CliError, EXIT } from './errors.ts';
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
    // With its parent's: commander gives `alerts rules set web -o json` the -o of `alerts rules`.
    const options = command.optsWithGlobals<T & CommonOptions>();
    await work(new Session(options), params.slice(0, -2) as A, options);
  };
}

/** The options of a paged list: the API's `limit` and `cursor` (docs/api.md). */
export interface PageOptions {
  limit?: string;
  cursor?: string;
}

/** Adds --limit and --cursor to a command that lists one page of a paged API list. */
export function paged(command: Command): Command {
  return command
    .option('--limit <n>', 'at most this many, 1 to 100 (default 50)')
    .option('--cursor <cursor>', 'the page after the one whose end printed this cursor');
}

/** The page query of --limit and --cursor; a limit that is not a whole number 1 to 100 is a usage error. */
export function pageQuery(options: PageOptions): { limit?: number; cursor?: string } {
  if (options.limit === undefined) return { cursor: options.cursor };
  const limit = Number(options.limit);
  if (!/^\d+$/.test(options.limit) || limit < 1 || limit > 100) {
    throw new CliError(`--limit takes a whole number from 1 to 100 (got "${options.limit}")`, EXIT.usage);
  }
  return { limit, cursor: options.cursor };
}

/** After a page with more behind it, how to ask for the next one (stderr; -o json has next_cursor). */
export function noteNextPage(session: Session, nextCursor: string | null, again: string): void {
  if (nextCursor) session.out.notice(`more: berth ${again} --cursor ${nextCursor}`);
}

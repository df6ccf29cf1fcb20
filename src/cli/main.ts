import { Command, CommanderError } from 'commander';
import packageJson from '../../package.json' with { type: 'json' };

import { EXIT } from './dev/errors.ts';
import { withExamples } from './help.ts';

type Register = (program: Command) => void;

/**
 * Each top-level command and the module that declares it. A command line that names one loads only
 * that module (and a module loads its heavier parts only when its command runs): `berth --version`
 * or a client command never loads the server's code.
 */
const COMMANDS: [names: string[], load: () => Promise<Register>][] = [
  [['serve', 'worker', 'migrate'], async () => (await import('./server-commands.ts')).serverCommands],
  [['admin'], async () => (await import('./admin.ts')).adminCommand],
  [['login', 'logout', 'whoami', 'contexts'], async () => (await import('./dev/auth.ts')).authCommands],
  [['envs', 'services'], async () => (await import('./dev/resources.ts')).resourceCommands],
  [
    ['deploy', 'deployments', 'rollback', 'restart'],
    async () => (await import('./dev/deploys.ts')).deployCommands,
  ],
  [['secrets'], async () => (await import('./dev/secrets.ts')).secretCommands],
  [['domains'], async () => (await import('./dev/domains.ts')).domainCommands],
  [['dependencies'], async () => (await import('./dev/dependencies.ts')).dependencyCommands],
  [['logs'], async () => (await import('./dev/logs.ts')).logCommands],
  [['metrics'], async () => (await import('./dev/metrics.ts')).metricsCommands],
  [['events'], async () => (await import('./dev/events.ts')).eventCommands],
  [['tokens'], async () => (await import('./dev/tokens.ts')).tokenCommands],
  [['webhooks'], async () => (await import('./dev/webhooks.ts')).webhookCommands],
  [['audit'], async () => (await import('./dev/audit.ts')).auditCommands],
  [['alerts'], async () => (await import('./dev/alerts.ts')).alertCommands],
  [['completion'], async () => (await import('./completion/command.ts')).completionCommand],
];

/**
 * The modules a command line needs: its command's, none for the version, every one otherwise (help, an
 * unknown command's suggestion, and the completion script, which describes every command).
 */
function modulesFor(args: string[] | undefined): (typeof COMMANDS)[number][] {
  const first = args?.[0];
  if (first === '-v' || first === '--version') return [];
  const named = COMMANDS.find(([names]) => first !== undefined && names.includes(first));
  return named && first !== 'completion' ? [named] : COMMANDS;
}

/** The whole command tree (`args` given: only what that command line needs). */
export async function buildCli(args?: string[]): Promise<Command> {
  const program = new Command('berth')
    .description('Berth: a self-hostable control plane for the Environment and Service Management API')
    .version(packageJson.version, '-v, --version', 'print the version');
  withExamples(
    program,
    'serve',
    'login --url http://127.0.0.1:8080',
    'services create -f service.yaml',
    'deploy "hello web" --tag v2 --wait',
    'secrets set "hello web" LOG_LEVEL=debug',
    'admin accounts list',
    'help deploy',
  );
  const modules = modulesFor(args);
  for (const register of await Promise.all(modules.map(([, load]) => load()))) register(program);
  if (modules === COMMANDS)
    program.addHelpText('after', `\n${everyCommandHelp(program)}\n${EXIT_CODES_HELP}`);
  configureEverywhere(program, 'berth');
  return program;
}

const EXIT_CODES_HELP = `Exit codes:
  0  done
  1  unexpected: a bug, the server unreachable or failing (5xx)
  2  usage: wrong arguments, no environment chosen, a bad config file
  3  auth: not logged in, or the API answered 401 or 403
  4  not found: the API answered 404, or no service or environment by that name
  5  validation: the API answered 422 (each field error is printed)
  6  conflict: the API answered 409, or a conditional write kept meeting newer changes
  7  deployment failed (deploy, rollback or restart with --wait; deployments wait)`;

/** Every command's full name and description, so that `berth --help` lists all of them. */
function everyCommandHelp(program: Command): string {
  const lines: string[] = [];
  const walk = (command: Command, prefix: string) => {
    const visible = new Set(command.createHelp().visibleCommands(command));
    for (const sub of command.commands) {
      if (!visible.has(sub)) continue;
      const usage =
        `${prefix}${sub.name()} ${sub.registeredArguments.map((a) => (a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`)).join(' ')}`.trim();
      // A command with subcommands is one too when it takes arguments (alerts rules <service>).
      if (sub.commands.length === 0 || sub.registeredArguments.length > 0)
        lines.push(`  berth ${usage.padEnd(46)} ${sub.description()}`);
      walk(sub, `${prefix}${sub.name()} `);
    }
  };
  walk(program, '');
  return `All commands:\n${lines.join('\n')}\n`;
}

/**
 * Usage errors throw (CommanderError) instead of exiting, so that main() gives them exit code 2; after
 * one, a hint to the command's help rather than the whole of it.
 */
function configureEverywhere(command: Command, path: string): void {
  command.exitOverride().showHelpAfterError(`(${path} --help shows how to use it)`);
  for (const sub of command.commands) configureEverywhere(sub, `${path} ${sub.name()}`);
}

/**
 * A reader that stops early (`berth logs web | head -1`) closes the pipe: the command has done what was
 * asked, so it ends with exit 0 rather than an EPIPE stack trace. Not for a server, whose supervisor must
 * see it stop.
 */
function exitQuietlyWhenReaderLeaves(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
      process.exit(0);
    });
  }
}

/**
 * Errors a user can fix exit 2; anything else exits 1. Both are one line on stderr; the stack trace of
 * an unexpected error is printed only with BERTH_LOG_LEVEL=debug (or trace), for a bug report.
 */
export async function main(argv: string[]): Promise<void> {
  // `berth help secrets set` is `berth secrets set --help` (commander's own help command takes one word);
  // `berth help bogus` is `berth bogus`: the unknown command's error and suggestion.
  const asked = argv.slice(3);
  const known = asked[0] === undefined || COMMANDS.some(([names]) => names.includes(asked[0] as string));
  const args = argv[2] !== 'help' ? argv.slice(2) : known ? [...asked, '--help'] : asked;
  if (args[0] !== 'serve' && args[0] !== 'worker') exitQuietlyWhenReaderLeaves();
  try {
    await (await buildCli(args)).parseAsync(args, { from: 'user' });
  } catch (error) {
    // Commander has printed the usage error (or the help, or the version) already.
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : EXIT.usage);
    const { cliErrorOf } = await import('./dev/api-errors.ts');
    const cliError = cliErrorOf(error);
    if (cliError) {
      process.stderr.write(`berth: ${cliError.message}\n`);
      process.exit(cliError.exitCode);
    }
    const known = (error as { isUserError?: boolean }).isUserError === true;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`berth: ${known ? message : `unexpected error: ${message}`}\n`);
    const verbose = ['debug', 'trace'].includes(process.env.BERTH_LOG_LEVEL ?? '');
    if (!known && verbose && error instanceof Error) process.stderr.write(`${error.stack}\n`);
    process.exit(known ? 2 : 1);
  }
}

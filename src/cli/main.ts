import tab from '@bomb.sh/tab/commander';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import packageJson from '../../package.json' with { type: 'json' };
import { ConfigError, loadConfig } from '../config.ts';
import { FEATURES, PLANS } from '../domain/plans.ts';
import { ProviderUnavailableError } from '../providers/registry.ts';
import { ListenError } from '../runtime.ts';
import { DataDirLockedError } from '../store/data-dir-lock.ts';
import { MigrationError } from '../store/migrate.ts';
import { MasterKeyError } from '../store/secret-box.ts';
import { adminCommand } from './admin.ts';
import { authCommands } from './dev/auth.ts';
import { dependencyCommands } from './dev/dependencies.ts';
import { domainCommands } from './dev/domains.ts';
import { cliErrorOf, EXIT } from './dev/errors.ts';
import { eventCommands } from './dev/events.ts';
import { logCommands } from './dev/logs.ts';
import { resourceCommands } from './dev/resources.ts';
import { secretCommands } from './dev/secrets.ts';
import { withExamples } from './help.ts';
import { migrateCommand, serveCommand, workerCommand } from './processes.ts';

/** Errors a user can cause or fix: printed as one clear line, never a stack trace. */
const USER_ERRORS = [
  ConfigError,
  DataDirLockedError,
  ListenError,
  MasterKeyError,
  MigrationError,
  ProviderUnavailableError,
];

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

export function buildCli(): Command {
  const program = new Command('berth')
    .description('Berth: a self-hostable control plane for the Environment and Service Management API')
    .version(packageJson.version, '-v, --version', 'print the version')
    .showHelpAfterError();
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

  withExamples(
    program
      .command('serve')
      .description('run the API (and, by default, the job workers) on BERTH_HOST:BERTH_PORT')
      .option(
        '--no-workers',
        'do not run job workers in this process (run berth worker instead; Postgres only)',
      ),
    'serve',
    'serve --no-workers   # with BERTH_DATABASE_URL=postgres://..., workers run as berth worker',
  ).action((options: { workers: boolean }) => serveCommand(loadConfig(), options));

  withExamples(
    program
      .command('worker')
      .description('run job workers only, sharing the work with other processes (needs BERTH_DATABASE_URL)')
      .option('--concurrency <n>', 'jobs run at once by this process', positiveInt, 8),
    'worker --concurrency 4',
  ).action((options: { concurrency: number }) => workerCommand(loadConfig(), options));

  withExamples(
    program.command('migrate').description('bring the database schema up to date and exit'),
    'migrate',
  ).action(() => migrateCommand(loadConfig()));

  program.addCommand(adminCommand(PLANS, FEATURES));

  authCommands(program);
  resourceCommands(program);
  secretCommands(program);
  domainCommands(program);
  dependencyCommands(program);
  logCommands(program);
  eventCommands(program);

  // Last: the completion scripts describe every command added before.
  tab(program, { completionCommandName: 'completion' });
  for (const command of program.commands) {
    if (command.name() === 'completion') {
      withExamples(
        command.description('print the shell completion script (bash, zsh, fish or powershell)'),
        'completion bash > /etc/bash_completion.d/berth',
        'completion zsh > ~/.zfunc/_berth',
        'completion fish > ~/.config/fish/completions/berth.fish',
      );
    }
    if (command.name() === 'complete') withExamples(command, 'complete -- services g');
  }
  program.addHelpText('after', `\n${everyCommandHelp(program)}\n${EXIT_CODES_HELP}`);
  exitOverrideEverywhere(program);
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
  7  deployment failed (deploy --wait, deployments wait)`;

/** Every command's full name and description, so that `berth --help` lists all of them. */
function everyCommandHelp(program: Command): string {
  const lines: string[] = [];
  const walk = (command: Command, prefix: string) => {
    const visible = new Set(command.createHelp().visibleCommands(command));
    for (const sub of command.commands) {
      if (!visible.has(sub)) continue;
      const usage =
        `${prefix}${sub.name()} ${sub.registeredArguments.map((a) => (a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`)).join(' ')}`.trim();
      if (sub.commands.length === 0) lines.push(`  berth ${usage.padEnd(46)} ${sub.description()}`);
      walk(sub, `${prefix}${sub.name()} `);
    }
  };
  walk(program, '');
  return `All commands:\n${lines.join('\n')}\n`;
}

/** Usage errors throw (CommanderError) instead of exiting, so that main() gives them exit code 2. */
function exitOverrideEverywhere(command: Command): void {
  command.exitOverride();
  for (const sub of command.commands) exitOverrideEverywhere(sub);
}

/**
 * Errors a user can fix exit 2; anything else exits 1. Both are one line on stderr; the stack trace of
 * an unexpected error is printed only with BERTH_LOG_LEVEL=debug (or trace), for a bug report.
 */
export async function main(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (error) {
    // Commander has printed the usage error (or the help, or the version) already.
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : EXIT.usage);
    const cliError = cliErrorOf(error);
    if (cliError) {
      process.stderr.write(`berth: ${cliError.message}\n`);
      process.exit(cliError.exitCode);
    }
    const known =
      USER_ERRORS.some((E) => error instanceof E) || (error as { isUserError?: boolean }).isUserError;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`berth: ${known ? message : `unexpected error: ${message}`}\n`);
    const verbose = ['debug', 'trace'].includes(process.env.BERTH_LOG_LEVEL ?? '');
    if (!known && verbose && error instanceof Error) process.stderr.write(`${error.stack}\n`);
    process.exit(known ? 2 : 1);
  }
}

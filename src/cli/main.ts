import { Command, InvalidArgumentError } from 'commander';
import packageJson from '../../package.json' with { type: 'json' };
import { ConfigError, loadConfig } from '../config.ts';
import { FEATURES, PLANS } from '../domain/plans.ts';
import { ProviderUnavailableError } from '../providers/registry.ts';
import { ListenError } from '../runtime.ts';
import { DataDirLockedError } from '../store/data-dir-lock.ts';
import { MigrationError } from '../store/migrate.ts';
import { MasterKeyError } from '../store/secret-box.ts';
import { adminCommand } from './admin.ts';
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
  withExamples(program, 'serve', 'admin accounts list', 'help admin');

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
  return program;
}

/**
 * Errors a user can fix exit 2; anything else exits 1. Both are one line on stderr; the stack trace of
 * an unexpected error is printed only with BERTH_LOG_LEVEL=debug (or trace), for a bug report.
 */
export async function main(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (error) {
    const known =
      USER_ERRORS.some((E) => error instanceof E) || (error as { isUserError?: boolean }).isUserError;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`berth: ${known ? message : `unexpected error: ${message}`}\n`);
    const verbose = ['debug', 'trace'].includes(process.env.BERTH_LOG_LEVEL ?? '');
    if (!known && verbose && error instanceof Error) process.stderr.write(`${error.stack}\n`);
    process.exit(known ? 2 : 1);
  }
}

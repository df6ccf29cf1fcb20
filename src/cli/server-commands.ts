import { type Command, InvalidArgumentError } from 'commander';
import { withExamples } from './help.ts';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

/** The server's own processes. Their code (Fastify, the database, the providers) loads only when one runs. */
export function serverCommands(program: Command): void {
  const processes = () => import('./processes.ts');
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
  ).action(async (options: { workers: boolean }) => (await processes()).serveCommand(options));

  withExamples(
    program
      .command('worker')
      .description('run job workers only, sharing the work with other processes (needs BERTH_DATABASE_URL)')
      .option('--concurrency <n>', 'jobs run at once by this process', positiveInt, 8),
    'worker --concurrency 4',
  ).action(async (options: { concurrency: number }) => (await processes()).workerCommand(options));

  withExamples(
    program.command('migrate').description('bring the database schema up to date and exit'),
    'migrate',
  ).action(async () => (await processes()).migrateCommand());
}

import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { type Column, stateText } from './output.ts';
import type { Session } from './session.ts';

type Dependency =
  paths['/v1/environments/{envId}/services/{serviceId}/dependencies']['get']['responses'][200]['content']['application/json']['data']['dependencies'][number];

const DEPENDENCY_COLUMNS: Column<Dependency>[] = [
  { header: 'KIND', value: (d) => `${d.kind}.${d.type}` },
  { header: 'ID', value: (d) => d.id },
  { header: 'STATE', value: (d) => stateText(d.state) },
  { header: 'NAME', value: (d) => d.attributes.name ?? '' },
  { header: 'ENDPOINT', value: (d) => d.attributes.endpoint ?? '' },
  { header: 'PROVISIONED', value: (d) => d.provisioned_at ?? '' },
  { header: 'ERROR', value: (d) => d.error },
];

const BACKUPS = '/v1/environments/{envId}/services/{serviceId}/dependencies/{dependencyId}/backups' as const;
type Backup =
  paths[typeof BACKUPS]['get']['responses'][200]['content']['application/json']['data']['backups'][number];

const BACKUP_COLUMNS: Column<Backup>[] = [
  { header: 'ID', value: (b) => b.id },
  { header: 'STATE', value: (b) => stateText(b.state) },
  { header: 'TRIGGER', value: (b) => b.trigger },
  { header: 'SIZE', value: (b) => (b.size_bytes === null ? '' : String(b.size_bytes)) },
  { header: 'CREATED', value: (b) => b.created_at },
  { header: 'RESTORE', value: (b) => (b.restore ? stateText(b.restore.state) : '') },
  { header: 'ERROR', value: (b) => b.error || b.restore?.error || '' },
];

/** How often `--wait` asks for the backup again. */
const WAIT_POLL_MS = 1_000;

/** Polls the backup until `done` says it ended; exits 7 when it ended failed. */
async function waitFor(
  session: Session,
  path: { envId: string; serviceId: string; dependencyId: string },
  backupId: string,
  ended: (b: Backup) => 'completed' | 'failed' | null,
  what: string,
): Promise<Backup> {
  for (;;) {
    const { backups } = unwrap(await session.api.GET(BACKUPS, { params: { path } }));
    const backup = backups.find((b) => b.id === backupId);
    if (!backup) throw new CliError(`backup ${backupId} is gone (retention)`, EXIT.notFound);
    const outcome = ended(backup);
    if (outcome === 'failed') {
      session.out.item(backup, undefined, { backup });
      throw new CliError(
        `${what} ${backupId} failed: ${backup.restore?.error || backup.error}`,
        EXIT.deploymentFailed,
      );
    }
    if (outcome === 'completed') return backup;
    await sleep(WAIT_POLL_MS);
  }
}

const BACKUP_FIELDS = [
  'id',
  'state',
  'trigger',
  'size_bytes',
  'created_at',
  'completed_at',
  'error',
  'restore',
];

/** Backups of one database or cache dependency: list, take one now, restore one. */
function backupCommands(dependencies: Command): void {
  const backups = withExamples(
    dependencies
      .command('backups')
      .description('backups of a database or cache dependency (rds, elasticache)'),
    'dependencies backups ls "hello web" main-db',
  );
  const pathOf = async (session: Session, reference: string, dependencyId: string) => {
    const { env, service } = await session.service(reference);
    return { envId: env.id, serviceId: service.id, dependencyId };
  };
  withExamples(
    common(
      backups
        .command('ls <service> <dependency>')
        .description("the dependency's backups, newest first: state, trigger, size, latest restore"),
    ),
    'dependencies backups ls "hello web" main-db',
  ).action(
    withSession(async (session, [reference = '', dependency = '']) => {
      const path = await pathOf(session, reference, dependency);
      const data = unwrap(await session.api.GET(BACKUPS, { params: { path } }));
      session.out.list(data.backups, BACKUP_COLUMNS, data);
    }),
  );
  withExamples(
    common(
      backups
        .command('create <service> <dependency>')
        .description('back the dependency up now; with --wait, until it completes (exit 7 if it fails)')
        .option('--wait', 'wait until the backup completes or fails'),
    ),
    'dependencies backups create "hello web" main-db --wait',
  ).action(
    withSession<[string, string], { wait?: boolean }>(async (session, [reference, dependency], options) => {
      const path = await pathOf(session, reference, dependency);
      let { backup } = unwrap(await session.api.POST(BACKUPS, { params: { path }, body: {} }));
      session.out.notice(`backing up ${dependency}: backup ${backup.id}`);
      if (options.wait) {
        backup = await waitFor(
          session,
          path,
          backup.id,
          (b) => (b.state === 'completed' || b.state === 'failed' ? b.state : null),
          'backup',
        );
      }
      session.out.item(backup, BACKUP_FIELDS, { backup });
    }),
  );
  withExamples(
    common(
      backups
        .command('restore <service> <dependency> <backup>')
        .description(
          "replace the dependency's data with the backup's; a dependency in use needs --force (its service stops meanwhile)",
        )
        .option('--force', 'stop the service using the dependency for the restore, and start it again after')
        .option('--new', 'load it into a copy of the dependency for inspection instead (nothing stops)')
        .option('--wait', 'wait until the restore completes or fails (exit 7 if it fails)'),
    ),
    'dependencies backups restore "hello web" main-db 5d0c3a5e-8a9b-4a5e-9f1c-3b2a1d0e9f8c --force --wait',
  ).action(
    withSession<[string, string, string], { force?: boolean; new?: boolean; wait?: boolean }>(
      async (session, [reference, dependency, backupId], options) => {
        const path = await pathOf(session, reference, dependency);
        let { backup } = unwrap(
          await session.api.POST(`${BACKUPS}/{backupId}/restore`, {
            params: { path: { ...path, backupId } },
            body: {
              ...(options.force ? { force: true } : {}),
              ...(options.new ? { into: 'new' as const } : {}),
            },
          }),
        );
        const stopped = backup.restore?.stopped_services ?? [];
        session.out.notice(
          `restoring ${dependency} from backup ${backup.id}` +
            (stopped.length > 0 ? `; stopped for the restore: service ${stopped.join(', ')}` : ''),
        );
        if (options.wait) {
          backup = await waitFor(
            session,
            path,
            backup.id,
            (b) =>
              b.restore?.state === 'completed' || b.restore?.state === 'failed' ? b.restore.state : null,
            'restore of backup',
          );
        }
        session.out.item(backup, BACKUP_FIELDS, { backup });
      },
    ),
  );
}

/** What the service's ops.json dependencies were made into (never a password: the API returns none). */
export function dependencyCommands(program: Command): void {
  const dependencies = withExamples(
    program.command('dependencies').description("what a service's ops.json dependencies were made into"),
    'dependencies ls "hello web"',
  );
  withExamples(
    common(
      dependencies
        .command('ls <service>')
        .description('each resource: kind, id, state, name, endpoint, when it was made'),
    ),
    'dependencies ls "hello web"',
    'dependencies ls "hello web" -o json',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}/services/{serviceId}/dependencies', {
          params: { path: { envId: env.id, serviceId: service.id } },
        }),
      );
      session.out.list(data.dependencies, DEPENDENCY_COLUMNS, data);
    }),
  );
  backupCommands(dependencies);
}

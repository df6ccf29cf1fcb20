import { CONSOLE_NOT_BUILT, consoleBuilt } from '../api/console.ts';
import { ConfigError, loadConfig } from '../config.ts';
import { readAcmeCa } from '../jobs/acme-order.ts';
import { startBackupSchedule } from '../jobs/backup-schedule.ts';
import { startCertificateRenewal } from '../jobs/certificates.ts';
import { startDependencyBackupSchedule } from '../jobs/dependency-backup-schedule.ts';
import { startEventRetention } from '../jobs/event-retention.ts';
import { checkWildcardZone, startIngressCertificate } from '../jobs/ingress-certificate.ts';
import { startObserver } from '../jobs/observer.ts';
import { startServiceMetrics } from '../jobs/service-metrics.ts';
import { ProviderUnavailableError, providerName } from '../providers/registry.ts';
import {
  ListenError,
  makeLogger,
  openRuntime,
  startGitPolling,
  startMetricsServer,
  startServer,
  startWorker,
} from '../runtime.ts';
import { DataDirLockedError } from '../store/data-dir-lock.ts';
import { openStore } from '../store/database.ts';
import { MigrationError } from '../store/migrate.ts';
import { MasterKeyError } from '../store/secret-box.ts';

/** Errors a user can cause or fix: main() prints them as one clear line (exit 2), never a stack trace. */
const USER_ERRORS = [
  ConfigError,
  DataDirLockedError,
  ListenError,
  MasterKeyError,
  MigrationError,
  ProviderUnavailableError,
];

async function marked(work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (USER_ERRORS.some((E) => error instanceof E)) Object.assign(error as Error, { isUserError: true });
    throw error;
  }
}

function onShutdown(close: () => Promise<void>): void {
  let closing = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (closing) process.exit(1);
      closing = true;
      close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  }
}

export const serveCommand = (options: { workers: boolean }) => marked(() => serveProcess(options));
export const workerCommand = (options: { concurrency: number }) => marked(() => workerProcess(options));
export const migrateCommand = () => marked(migrateProcess);

async function serveProcess(options: { workers: boolean }): Promise<void> {
  const config = loadConfig();
  if (!options.workers && !config.databaseUrl) {
    throw new ConfigError(
      '--no-workers needs BERTH_DATABASE_URL: with the embedded database only berth serve can run jobs',
    );
  }
  const server = await startServer(config, { workers: options.workers });
  // Before "listening" is printed: whoever waits for that line may signal at once.
  onShutdown(server.close);
  const lines = [
    `Berth is listening on ${server.url} (provider ${providerName(config)}, ${server.runtime.deps.store.kind} database)`,
    consoleBuilt()
      ? `Console: ${server.url}/ (sign in with your email and password, or an API token)`
      : `Console: not built: ${CONSOLE_NOT_BUILT}`,
  ];
  if (server.metricsUrl) lines.push(`Metrics: ${server.metricsUrl}`);
  if (server.adminTokenGenerated) {
    lines.push(
      `Admin token (for /admin/v1 and berth admin): ${server.adminToken}`,
      `  saved in ${config.dataDir}/admin-token (mode 0600)`,
    );
  }
  if (server.firstStart) {
    const { apiToken, accountId, environmentId, ownerEmail, ownerSignInPath } = server.firstStart;
    lines.push(
      '',
      'First start: created the account "default" (plan pro), its owner, the environment "default" and an API token.',
      `  account:     ${accountId}`,
      `  owner:       ${ownerEmail}`,
      `  sign in:     ${server.url}${ownerSignInPath}   (once, within a day: set the owner's password there)`,
      `  environment: ${environmentId}`,
      `  API token:   ${apiToken}   (shown only now; Berth keeps only its hash)`,
      '',
      'Try it:',
      `  curl -H "Authorization: Bearer ${apiToken}" ${server.url}/v1/environments`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function workerProcess(options: { concurrency: number }): Promise<void> {
  const config = loadConfig();
  if (!config.databaseUrl) {
    throw new ConfigError(
      'berth worker needs BERTH_DATABASE_URL (Postgres): the embedded database belongs to the one berth serve process, which runs its own workers',
    );
  }
  readAcmeCa(config.acme);
  const runtime = await openRuntime(config);
  try {
    checkWildcardZone(runtime.deps);
  } catch (error) {
    await runtime.close();
    throw error;
  }
  const metrics = await startMetricsServer(runtime.deps).catch(async (error) => {
    await runtime.close();
    throw error;
  });
  const worker = startWorker(runtime.deps, { concurrency: options.concurrency });
  const observer = startObserver(runtime.deps);
  const retention = startEventRetention(runtime.deps);
  const serviceMetrics = startServiceMetrics(runtime.deps);
  const backups = startDependencyBackupSchedule(runtime.deps);
  const poller = startGitPolling(runtime.deps);
  const stateBackups = startBackupSchedule(runtime.deps);
  const renewals = startCertificateRenewal(runtime.deps);
  const wildcard = startIngressCertificate(runtime.deps);
  onShutdown(async () => {
    await worker.stop();
    await observer.stop();
    await retention.stop();
    await serviceMetrics.stop();
    await backups?.stop();
    await poller?.stop();
    await stateBackups?.stop();
    await renewals?.stop();
    await wildcard?.stop();
    await metrics?.close();
    await runtime.close();
  });
  await worker.start();
  runtime.deps.logger.info({ worker: worker.id, metrics: metrics?.url }, 'worker started');
}

async function migrateProcess(): Promise<void> {
  const config = loadConfig();
  const store = await openStore({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await store.close();
  makeLogger(config).info('database schema is up to date');
}

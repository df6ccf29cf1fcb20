import fs from 'node:fs';
import tls from 'node:tls';
import pino, { type Logger } from 'pino';
import { buildApp } from './api/app.ts';
import { readTlsPair, watchTlsFiles } from './api/tls-files.ts';
import { adminTokenFor, type FirstStart, firstStart } from './bootstrap.ts';
import type { Config } from './config.ts';
import { DnsLookup } from './dns.ts';
import { certificatesOn } from './domain/usecases/certificates.ts';
import type { Deps } from './domain/usecases/context.ts';
import { collectWhenIdle } from './idle-collector.ts';
import { readAcmeCa } from './jobs/acme-order.ts';
import { apiCertificateSni, startApiCertificate } from './jobs/api-certificate.ts';
import { startBackupSchedule } from './jobs/backup-schedule.ts';
import { certificateSource, startCertificateRenewal } from './jobs/certificates.ts';
import { startDependencyBackupSchedule } from './jobs/dependency-backup-schedule.ts';
import { startEventRetention } from './jobs/event-retention.ts';
import { startGitPoller } from './jobs/git-poller.ts';
import { jobHandlers } from './jobs/handlers/index.ts';
import { checkWildcardZone, startIngressCertificate } from './jobs/ingress-certificate.ts';
import { startObserver } from './jobs/observer.ts';
import { startServiceMetrics } from './jobs/service-metrics.ts';
import { DEFAULT_CONCURRENCY, jobBudgets, Worker } from './jobs/worker.ts';
import { instrumentJobs } from './metrics/jobs.ts';
import { Metrics } from './metrics/metrics.ts';
import { type MetricsServer, serveMetrics } from './metrics/server.ts';
import { openProvider, providerName } from './providers/registry.ts';
import { openStore, type Store } from './store/database.ts';
import { releaseAllLeases } from './store/repositories/jobs.ts';
import { checkMasterKey, keyFileOf, loadMasterKeys, MasterKeyError, SecretBox } from './store/secret-box.ts';

/** Everything a Berth process holds, and how to let go of it. */
export interface Runtime {
  deps: Deps;
  close(): Promise<void>;
}

export function makeLogger(config: Config): Logger {
  return pino({ level: config.logLevel, base: { pid: process.pid } });
}

export async function openRuntime(
  config: Config,
  logger: Logger = makeLogger(config),
  options: { onQuery?: (sql: string) => void } = {},
): Promise<Runtime> {
  // A BERTH_PROVIDER typo is refused before the database is opened.
  const metrics = new Metrics(providerName(config));
  if (config.metricsBind) metrics.collectProcessMetrics();
  const store = await openStore({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    onQuery: options.onQuery,
    onStatement: statementTimer(config, metrics),
    onConnectionError: (err) =>
      logger.warn({ err }, 'an idle database connection failed; the pool replaces it'),
  });
  try {
    const provider = await openProvider(config, store.db, logger);
    const generating = !config.masterKey && !fs.existsSync(keyFileOf(config.dataDir));
    const secretBox = new SecretBox(loadMasterKeys(config.masterKey, config.dataDir));
    await checkMasterKey(store.db, secretBox).catch((error: unknown) => {
      // A key generated now for a database sealed with another one is wrong: left in the directory, the
      // next start (given no BERTH_MASTER_KEY) would take it for the installation's own.
      if (generating && error instanceof MasterKeyError)
        fs.rmSync(keyFileOf(config.dataDir), { force: true });
      throw error;
    });
    metrics.queueDb = store.db;
    const dns = new DnsLookup(config.dnsServers);
    const deps: Deps = { store, provider, dns, secretBox, config, logger, metrics };
    return {
      deps,
      close: async () => {
        await provider.close();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** Statement latency, only when metrics are served: a process that serves none times nothing. */
function statementTimer(config: Config, metrics: Metrics): ((ms: number, ok: boolean) => void) | undefined {
  if (!config.metricsBind) return undefined;
  const ok = metrics.dbStatements.labels({ outcome: 'ok' });
  const error = metrics.dbStatements.labels({ outcome: 'error' });
  return (ms, succeeded) => (succeeded ? ok : error).observe(ms / 1000);
}

/** GET /metrics on BERTH_METRICS_BIND, when it is set; a bind that fails says which setting to change. */
export async function startMetricsServer(deps: Deps): Promise<MetricsServer | null> {
  const bind = deps.config.metricsBind;
  if (!bind) return null;
  return serveMetrics(deps.metrics, bind).catch((error: NodeJS.ErrnoException) => {
    throw new ListenError(
      `BERTH_METRICS_BIND ${bind.host}:${bind.port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`,
    );
  });
}

export function startWorker(deps: Deps, options: { concurrency?: number; pollMs?: number } = {}): Worker {
  const { config } = deps;
  return new Worker({
    store: deps.store,
    handlers: instrumentJobs(jobHandlers(deps), deps.metrics),
    logger: deps.logger.child({ component: 'worker' }),
    leaseMs: config.jobLeaseMs,
    budgets: jobBudgets({
      concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
      perAccount: config.jobConcurrencyPerAccount,
      webhookConcurrency: config.webhookConcurrency,
      webhookPerAccount: config.webhookConcurrencyPerAccount,
    }),
    pollMs: options.pollMs,
  });
}

/** The git poller, when BERTH_GIT_POLL_INTERVAL_MS asks for one; it runs wherever workers run. */
export function startGitPolling(deps: Deps): { stop(): Promise<void> } | null {
  return deps.config.gitPollIntervalMs > 0 ? startGitPoller(deps) : null;
}

export interface Server {
  url: string;
  /** Where GET /metrics is served (BERTH_METRICS_BIND), if anywhere. */
  metricsUrl: string | null;
  adminToken: string;
  adminTokenGenerated: boolean;
  firstStart: FirstStart | null;
  runtime: Runtime;
  close(): Promise<void>;
}

/** A port or address the server cannot listen on: one line that says which setting to change. */
export class ListenError extends Error {}

function listenError(error: NodeJS.ErrnoException, config: Config): Error {
  const where = `${config.host}:${config.port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return new ListenError(`port ${config.port} is in use: set BERTH_PORT`);
    case 'EACCES':
      return new ListenError(`not allowed to listen on ${where}: set BERTH_PORT to 1024 or above`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
      return new ListenError(`${config.host} is not an address of this machine: set BERTH_HOST`);
    default:
      return error;
  }
}

/** Ten seconds without a request count as quiet: the heap the last burst grew is given back then. */
const IDLE_COLLECT_MS = 10_000;
/** A second without a request after the start: whoever waited for the start has made its first requests. */
const START_QUIET_MS = 1_000;

/**
 * `berth serve`: the API and, unless told otherwise, the workers, in one process. The API binds its
 * port before the first start creates anything (account, environment, token, admin token file): a
 * start that fails leaves the next one free to do it and print the token.
 */
export async function startServer(
  config: Config,
  options: { workers?: boolean; logger?: Logger; onQuery?: (sql: string) => void } = {},
): Promise<Server> {
  // Bad certificate files stop the start before anything is opened.
  const tlsPair = config.tls ? readTlsPair(config.tls) : undefined;
  readAcmeCa(config.acme);
  const runtime = await openRuntime(config, options.logger, { onQuery: options.onQuery });
  const { deps } = runtime;
  try {
    checkWildcardZone(deps);
  } catch (error) {
    await runtime.close();
    throw error;
  }
  let app: Awaited<ReturnType<typeof buildApp>> | null = null;
  let worker: Worker | null = null;
  let observer: ReturnType<typeof startObserver> | null = null;
  let retention: ReturnType<typeof startEventRetention> | null = null;
  let serviceMetrics: ReturnType<typeof startServiceMetrics> | null = null;
  let backups: ReturnType<typeof startDependencyBackupSchedule> = null;
  let poller: ReturnType<typeof startGitPolling> = null;
  let stateBackups: ReturnType<typeof startBackupSchedule> = null;
  let renewals: ReturnType<typeof startCertificateRenewal> = null;
  let wildcard: ReturnType<typeof startIngressCertificate> = null;
  let workerStore: Store | null = null;
  let metricsServer: MetricsServer | null = null;
  try {
    // The embedded database has one process, so a lease left in it belongs to a process that is gone.
    if (deps.store.kind === 'embedded') await releaseAllLeases(deps.store.db);
    const admin = adminTokenFor(config.adminToken, config.dataDir);
    // Without workers here, /ready does not ask about them; with, it asks until they are started.
    const workerAlive = options.workers === false ? undefined : () => worker?.alive() ?? false;
    // BERTH_TLS_ACME_NAME: HTTPS with the certificate ordered for it, once there (until then handshakes fail).
    await startApiCertificate(deps);
    const tlsOptions = config.tlsAcmeName
      ? { SNICallback: apiCertificateSni(deps, config.tlsAcmeName, deps.logger) }
      : tlsPair;
    app = await buildApp(deps, { adminToken: admin.token, tls: tlsOptions, workerAlive });
    const address = await app.listen({ host: config.host, port: config.port }).catch((error) => {
      throw listenError(error, config);
    });
    // An HTTPS server (buildApp made one when given the pair) is a tls.Server.
    if (config.tls && app.server instanceof tls.Server) {
      const watcher = watchTlsFiles(app.server, config.tls, deps.logger);
      app.server.on('close', () => watcher.stop());
    }
    await deps.provider.serving?.start(
      certificatesOn(deps) ? { certificates: certificateSource(deps) } : undefined,
    );
    metricsServer = await startMetricsServer(deps);
    const collector = collectWhenIdle({ idleMs: IDLE_COLLECT_MS });
    app.fastPolls.onEveryRequest(() => collector.touch());
    app.server.on('close', () => collector.stop());
    admin.save();
    const first = await firstStart(deps);
    // On Postgres the workers get a pool of their own: API requests cannot starve a lease renewal, nor
    // a burst of jobs the API. The embedded database has one connection to share.
    workerStore =
      options.workers !== false && deps.store.kind === 'postgres'
        ? await openStore({
            databaseUrl: config.databaseUrl,
            dataDir: config.dataDir,
            migrate: false,
            // Each job holds one connection at a time, plus lease renewals and the observer.
            poolSize: DEFAULT_CONCURRENCY + config.webhookConcurrency + 2,
            notifications: deps.store.notifications,
            onStatement: statementTimer(config, deps.metrics),
            onConnectionError: (err) =>
              deps.logger.warn({ err }, 'an idle database connection failed; the pool replaces it'),
          })
        : null;
    const workerDeps: Deps = workerStore ? { ...deps, store: workerStore } : deps;
    worker = options.workers === false ? null : startWorker(workerDeps);
    await worker?.start();
    observer = worker ? startObserver(workerDeps) : null;
    retention = worker ? startEventRetention(workerDeps) : null;
    serviceMetrics = worker ? startServiceMetrics(workerDeps) : null;
    backups = worker ? startDependencyBackupSchedule(workerDeps) : null;
    poller = worker ? startGitPolling(workerDeps) : null;
    stateBackups = worker ? startBackupSchedule(workerDeps) : null;
    renewals = worker ? startCertificateRenewal(workerDeps) : null;
    wildcard = worker ? startIngressCertificate(workerDeps) : null;
    // The start allocated more than anything after it (the embedded database's snapshot, its
    // WebAssembly, the routes): given back at the first second without a request, once whoever waited
    // for the start has made its first ones. Collected before the start was announced, it held back the
    // announcement and the first answers by 0.3-0.7 s (docs/performance.md, "The embedded start: its
    // collection and its modules").
    collector.collectWhenQuiet(START_QUIET_MS);
    const running = {
      app,
      worker,
      observer,
      retention,
      serviceMetrics,
      backups,
      poller,
      renewals,
      wildcard,
      stateBackups,
      workerStore,
      metricsServer,
    };
    return {
      url: address,
      adminToken: admin.token,
      adminTokenGenerated: admin.generated,
      metricsUrl: metricsServer?.url ?? null,
      firstStart: first,
      runtime,
      close: async () => {
        await running.app.close();
        await running.metricsServer?.close();
        await running.worker?.stop();
        await running.observer?.stop();
        await running.retention?.stop();
        await running.serviceMetrics?.stop();
        await running.backups?.stop();
        await running.poller?.stop();
        await running.stateBackups?.stop();
        await running.renewals?.stop();
        await running.wildcard?.stop();
        await running.workerStore?.close();
        await runtime.close();
      },
    };
  } catch (error) {
    await app?.close();
    await metricsServer?.close();
    await worker?.stop();
    await observer?.stop();
    await retention?.stop();
    await serviceMetrics?.stop();
    await backups?.stop();
    await poller?.stop();
    await stateBackups?.stop();
    await renewals?.stop();
    await wildcard?.stop();
    await workerStore?.close();
    await runtime.close();
    throw error;
  }
}

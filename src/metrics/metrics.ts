import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import packageJson from '../../package.json' with { type: 'json' };
import type { Db } from '../store/database.ts';
import { JOB_KINDS, queuedJobs } from '../store/repositories/jobs.ts';

/** Seconds: from a fast read to a slow long-poll (held reads wait up to a minute). */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60];
/** Seconds: a sim deployment takes a second, a docker build minutes. */
const DEPLOY_BUCKETS = [1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];
const DB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5];

export type DeploymentOutcome = 'success' | 'failed' | 'cancelled';

const BACKUP_OUTCOMES = ['written', 'failed'] as const;
const AUTH_SURFACES = ['api', 'hooks'] as const;
const REFUSAL_REASONS = ['rate_limit', 'auth_failures'] as const;

/**
 * Exports every series of a counter's closed label set at 0 from the start: a series that first
 * appears at 1 is no increase to Prometheus, so `increase(...) > 0` would miss the first failure.
 */
function startAtZero<L extends string>(counter: Counter<L>, label: L, values: readonly string[]): Counter<L> {
  for (const value of values) counter.inc({ [label]: value } as Partial<Record<L, string>>, 0);
  return counter;
}

/**
 * Berth's own metrics, one registry per process (docs/metrics.md lists them). Counters and histograms
 * count what this process did, so Prometheus sums them over processes; the queue gauges describe the
 * shared database, so every process reports the same value (aggregate them with max). No label value
 * comes from a user: routes are templates, everything else a closed set.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Histogram<'route' | 'method' | 'status'>;
  readonly jobsClaimed: Counter<'kind'>;
  readonly jobsRetried: Counter<'kind'>;
  readonly jobsFailed: Counter<'kind'>;
  readonly jobsRunning: Gauge<'kind'>;
  readonly jobDuration: Histogram<'kind' | 'outcome'>;
  readonly deployments: Histogram<'provider' | 'outcome'>;
  private readonly provider: string;
  readonly authFailures: Counter<'surface'>;
  readonly refusals: Counter<'reason'>;
  readonly dbStatements: Histogram<'outcome'>;
  readonly backups: Counter<'outcome'>;
  readonly backupWritten: Gauge;
  /** Server-sent event streams open now; set by the app that serves them. */
  openStreams: () => number = () => 0;
  /** The database the queue gauges read at each scrape; unset, they are not reported. */
  queueDb: Db | undefined;

  /** `provider`: the driver this process deploys with (a deployment's label). */
  constructor(provider: string) {
    this.provider = provider;
    const registers = [this.registry];
    new Gauge({
      name: 'berth_build_info',
      help: 'Always 1: the Berth and Node.js versions this process runs.',
      labelNames: ['version', 'node'],
      registers,
    }).set({ version: packageJson.version, node: process.versions.node }, 1);
    this.httpRequests = new Histogram({
      name: 'berth_http_request_duration_seconds',
      help: 'HTTP requests answered, by route template, method and status: time to the last byte.',
      labelNames: ['route', 'method', 'status'],
      buckets: HTTP_BUCKETS,
      registers,
    });
    this.jobsClaimed = startAtZero(
      new Counter({
        name: 'berth_jobs_claimed_total',
        help: 'Jobs this process claimed and ran, by kind (each attempt counts).',
        labelNames: ['kind'],
        registers,
      }),
      'kind',
      JOB_KINDS,
    );
    this.jobsRetried = startAtZero(
      new Counter({
        name: 'berth_jobs_retried_total',
        help: 'Claims of a job that was tried before (a failed attempt or a lapsed lease), by kind.',
        labelNames: ['kind'],
        registers,
      }),
      'kind',
      JOB_KINDS,
    );
    this.jobsFailed = startAtZero(
      new Counter({
        name: 'berth_jobs_failed_total',
        help: 'Jobs this process failed for good (no attempt left, or a permanent error), by kind.',
        labelNames: ['kind'],
        registers,
      }),
      'kind',
      JOB_KINDS,
    );
    this.jobsRunning = new Gauge({
      name: 'berth_jobs_running',
      help: 'Jobs this process is running now, by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.jobDuration = new Histogram({
      name: 'berth_job_duration_seconds',
      help: 'One attempt of a job, by kind and outcome (done: finished; error: failed, retried or not).',
      labelNames: ['kind', 'outcome'],
      buckets: JOB_BUCKETS,
      registers,
    });
    // Read at each scrape: two small aggregates over the jobs table, never on a request.
    const collectQueue = async () => {
      queued.reset();
      oldest.reset();
      if (!this.queueDb) return;
      const rows = await queuedJobs(this.queueDb).catch(() => undefined);
      if (!rows) return;
      for (const kind of JOB_KINDS) {
        const row = rows.find((r) => r.kind === kind);
        queued.set({ kind }, row?.count ?? 0);
        oldest.set({ kind }, row?.oldestS ?? 0);
      }
    };
    let pending: Promise<void> | undefined;
    const once = () => {
      pending ??= collectQueue().finally(() => {
        pending = undefined;
      });
      return pending;
    };
    const queued = new Gauge({
      name: 'berth_jobs_queued',
      help: 'Jobs waiting in the shared queue (no live lease), by kind. The same in every process.',
      labelNames: ['kind'],
      registers,
      collect: once,
    });
    const oldest = new Gauge({
      name: 'berth_jobs_oldest_age_seconds',
      help: 'Age of the oldest waiting job, by kind (0: none waits). The same in every process.',
      labelNames: ['kind'],
      registers,
      collect: once,
    });
    this.deployments = new Histogram({
      name: 'berth_deployment_duration_seconds',
      help: 'Deployments that ended in this process, by provider and outcome: time from creation to the outcome.',
      labelNames: ['provider', 'outcome'],
      buckets: DEPLOY_BUCKETS,
      registers,
    });
    const streams: Gauge = new Gauge({
      name: 'berth_open_streams',
      help: 'Server-sent event streams open on this process: GET /v1/events and log follows.',
      registers,
      collect: (): void => streams.set(this.openStreams()),
    });
    this.authFailures = startAtZero(
      new Counter({
        name: 'berth_auth_failures_total',
        help: 'Failed authentications (401), by surface: api (/v1 and /admin/v1) or hooks (git webhooks).',
        labelNames: ['surface'],
        registers,
      }),
      'surface',
      AUTH_SURFACES,
    );
    this.refusals = startAtZero(
      new Counter({
        name: 'berth_refusals_total',
        help: 'Requests refused with 429, by reason: rate_limit (per token) or auth_failures (per address).',
        labelNames: ['reason'],
        registers,
      }),
      'reason',
      REFUSAL_REASONS,
    );
    this.dbStatements = new Histogram({
      name: 'berth_db_statement_duration_seconds',
      help: 'Database statements this process ran, by outcome (ok or error).',
      labelNames: ['outcome'],
      buckets: DB_BUCKETS,
      registers,
    });
    this.backups = startAtZero(
      new Counter({
        name: 'berth_backups_total',
        help: "Scheduled backups of Berth's own state this process took, by outcome (written or failed).",
        labelNames: ['outcome'],
        registers,
      }),
      'outcome',
      BACKUP_OUTCOMES,
    );
    this.backupWritten = new Gauge({
      name: 'berth_backup_last_written_timestamp_seconds',
      help: 'When this process last wrote a scheduled backup (Unix time); 0 before its first.',
      registers,
    });
  }

  /** prom-client's process and Node.js metrics (CPU, memory, event loop lag, GC): only for a served registry. */
  collectProcessMetrics(): void {
    collectDefaultMetrics({ register: this.registry });
  }

  deploymentEnded(outcome: DeploymentOutcome, createdAt: Date): void {
    const seconds = Math.max(0, (Date.now() - createdAt.getTime()) / 1000);
    this.deployments.observe({ provider: this.provider, outcome }, seconds);
  }
}

/**
 * ops.json `cron.cron_jobs` on the simulated cloud: on each tick of a job's schedule, the request the
 * cloud would send to the service's internal address is recorded in sim_calls (operation
 * `cron_request`, outcome `GET <url>`). It runs in `berth serve` only, from the jobs the workloads in
 * place declare, rescanned at once when this process moves a workload (`changed`) and every few seconds
 * so that a deploy made by another process is picked up; on the embedded database no other process can
 * make one, so the timer only backs the first up (once a minute: an idle server's rescan every 2 s was a
 * fifth of its statements, docs/performance.md "An idle embedded server").
 * @module
 */
import { Cron } from 'croner';
import { sql } from 'kysely';
import type { Serving } from '../provider.ts';
import type { SimDb } from './tables.ts';

const RESCAN_MS = 2000;
/** One process owns the database (embedded): every workload move is this process's, and heard. */
const RESCAN_ALONE_MS = 60_000;

export interface SimCronJob {
  schedule: string;
  path: string;
  /** The service's internal address and the path. */
  url: string;
}

export class SimCronRequests implements Serving {
  private readonly schedules = new Map<string, Cron>();
  private timer: NodeJS.Timeout | undefined;
  private readonly db: SimDb;
  private readonly caller: string;
  private readonly rescanMs: number;
  private started = false;
  /** The rescan under way, and whether another must follow it (a change came while it read). */
  private scanning: Promise<void> | undefined;
  private again = false;

  constructor(db: SimDb, caller: string, options: { alone?: boolean } = {}) {
    this.db = db;
    this.caller = caller;
    this.rescanMs = options.alone ? RESCAN_ALONE_MS : RESCAN_MS;
  }

  async start(): Promise<void> {
    this.started = true;
    await this.rescan();
    this.timer = setInterval(() => this.changed(), this.rescanMs);
  }

  /**
   * This process moved `serviceId`'s workload (a deploy, a delete), which now declares `cronJobs` jobs:
   * the schedules follow it now, not at the next tick. A move that neither has jobs nor ends any kept
   * here changes no schedule, and rescans nothing (deployments without cron jobs keep off the table).
   */
  moved(serviceId: string, cronJobs: number): void {
    if (cronJobs === 0 && ![...this.schedules.keys()].some((key) => key.startsWith(`${serviceId} `))) return;
    this.changed();
  }

  private changed(): void {
    if (!this.started) return;
    if (this.scanning) {
      this.again = true;
      return;
    }
    this.scanning = this.rescan()
      .catch(() => undefined)
      .finally(() => {
        this.scanning = undefined;
        if (this.again) {
          this.again = false;
          this.changed();
        }
      });
  }

  async stop(): Promise<void> {
    this.started = false;
    clearInterval(this.timer);
    await this.scanning;
    for (const cron of this.schedules.values()) cron.stop();
    this.schedules.clear();
  }

  private async rescan(): Promise<void> {
    const workloads = await this.db
      .selectFrom('sim_workloads')
      .select(['service_id', 'cron_jobs'])
      .where('run_status', '=', 'running')
      .where(sql<boolean>`jsonb_array_length(cron_jobs) > 0`)
      .execute();
    const seen = new Set<string>();
    for (const { service_id: serviceId, cron_jobs: jobs } of workloads) {
      for (const job of jobs as SimCronJob[]) {
        const key = `${serviceId} ${job.schedule} ${job.url}`;
        seen.add(key);
        if (this.schedules.has(key)) continue;
        const cron = new Cron(job.schedule, { protect: true }, async () => {
          await this.db
            .insertInto('sim_calls')
            .values({
              operation: 'cron_request',
              subject_id: serviceId,
              service_id: serviceId,
              worker: this.caller,
              outcome: `GET ${job.url}`,
              finished_at: sql`clock_timestamp()`,
            })
            .execute()
            .catch(() => undefined);
        });
        this.schedules.set(key, cron);
      }
    }
    for (const [key, cron] of this.schedules) {
      if (!seen.has(key)) {
        cron.stop();
        this.schedules.delete(key);
      }
    }
  }
}

/**
 * ops.json `cron.cron_jobs` on the simulated cloud: on each tick of a job's schedule, the request the
 * cloud would send to the service's internal address is recorded in sim_calls (operation
 * `cron_request`, outcome `GET <url>`). It runs in `berth serve` only, from the jobs the workloads in
 * place declare, rescanned every few seconds so that a deploy made by another process is picked up.
 * @module
 */
import { Cron } from 'croner';
import { sql } from 'kysely';
import type { Serving } from '../provider.ts';
import type { SimDb } from './tables.ts';

const RESCAN_MS = 2000;

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

  constructor(db: SimDb, caller: string) {
    this.db = db;
    this.caller = caller;
  }

  async start(): Promise<void> {
    await this.rescan();
    this.timer = setInterval(() => {
      this.rescan().catch(() => undefined);
    }, RESCAN_MS);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
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

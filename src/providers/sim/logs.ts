import { setTimeout as sleep } from 'node:timers/promises';
import type { LogLine, LogQuery, RuntimeSpec, ServiceLogs, ServiceRef } from '../provider.ts';
import { REMOVED_GENERATION } from '../provider.ts';
import type { SimDb } from './tables.ts';

/** Each simulated replica prints one line a second, from the moment its deployment went live. */
const TICK_MS = 1000;

interface Workload {
  deployment_id: string;
  replicas: number;
  started: number;
}

/** What a simulated replica prints at tick `k`: plausible output for the service's type. */
function simLine(type: ServiceRef['type'], k: number): { stream: 'stdout' | 'stderr'; line: string } {
  if (k % 7 === 6) return { stream: 'stderr', line: `warn: slow upstream, retried in ${k % 5}0ms` };
  switch (type) {
    case 'web':
    case 'internal':
      return {
        stream: 'stdout',
        line: `GET ${k % 3 === 0 ? '/' : '/healthz'} 200 ${1 + (k % 9)}.${k % 10}ms`,
      };
    case 'job':
      return { stream: 'stdout', line: `job step ${k} done` };
    case 'cron':
      return { stream: 'stdout', line: `cron run ${k}: finished with code 0` };
    default:
      return { stream: 'stdout', line: `processed task ${k}` };
  }
}

/**
 * The sim driver's service logs: made up, but deterministic (a line at a given second is the same on
 * every read) and timed like a real workload's, so `tail`, `since` and `follow` behave as on a runtime.
 */
export class SimLogs implements ServiceLogs {
  private readonly db: SimDb;
  constructor(db: SimDb) {
    this.db = db;
  }

  private async workload(serviceId: string): Promise<Workload | null> {
    const row = await this.db
      .selectFrom('sim_workloads')
      .select(['deployment_id', 'replicas', 'updated_at', 'generation', 'run_status'])
      .where('service_id', '=', serviceId)
      .executeTakeFirst();
    if (!row || Number(row.generation) === REMOVED_GENERATION) return null;
    return {
      deployment_id: row.deployment_id,
      replicas: row.run_status === 'running' ? Math.max(row.replicas, 0) : 1,
      started: new Date(row.updated_at).getTime(),
    };
  }

  /** The lines printed in [from, to), at most the newest `limit`. */
  private linesBetween(
    service: ServiceRef & Pick<RuntimeSpec, 'subdomain'>,
    w: Workload,
    from: number,
    to: number,
    limit: number,
  ): LogLine[] {
    if (w.replicas === 0 || to <= w.started) return [];
    const first = Math.max(0, Math.ceil((Math.max(from, w.started) - w.started) / TICK_MS));
    const last = Math.floor((to - 1 - w.started) / TICK_MS);
    const start = Math.max(first, last - Math.ceil(limit / w.replicas) + 1);
    const lines: LogLine[] = [];
    for (let k = start; k <= last; k++) {
      for (let i = 0; i < w.replicas; i++) {
        const { stream, line } = simLine(service.type, k);
        lines.push({
          time: new Date(w.started + k * TICK_MS).toISOString(),
          replica: `${service.subdomain}-${w.deployment_id.slice(0, 8)}-${i}`,
          stream,
          line,
        });
      }
    }
    return lines.slice(-limit);
  }

  async *read(service: ServiceRef & Pick<RuntimeSpec, 'subdomain'>, query: LogQuery): AsyncIterable<LogLine> {
    const since = query.since?.getTime() ?? Number.NEGATIVE_INFINITY;
    let from = Date.now();
    const workload = await this.workload(service.id);
    if (workload) yield* this.linesBetween(service, workload, since, from, query.tail);
    while (query.follow && !query.signal.aborted) {
      await sleep(TICK_MS, undefined, { signal: query.signal }).catch(() => undefined);
      if (query.signal.aborted) return;
      const to = Date.now();
      const now = await this.workload(service.id);
      if (now) yield* this.linesBetween(service, now, Math.max(from, since), to, Number.MAX_SAFE_INTEGER);
      from = to;
    }
  }
}

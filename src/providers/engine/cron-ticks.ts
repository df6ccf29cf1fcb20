/**
 * Cron ticks claimed once across Berth processes. Every `berth serve` schedules every cron service and
 * every ops.json cron job of the Engine drivers (docker, swarm); before a tick runs, the process inserts
 * (service, job, scheduled time) into docker_cron_ticks: the insert that lands runs the tick, the others
 * see the row and skip it. The scheduled time, not the moment the callback runs, names the tick, so
 * every process names it alike.
 * @module
 */
import type { DockerDb } from './tables.ts';

/** Claims older than this are history nobody reads again. */
const CLAIMS_KEPT_MS = 24 * 3600_000;

/** The job of a cron service's own tick (an ops.json cron job is named by its schedule and path). */
export const SERVICE_TICK = '';

/** The tick's scheduled time to the second: what every process's scheduler names it. */
export function tickTime(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 1000) * 1000);
}

/** Claims the tick for this process; false when another process did. */
export async function claimTick(db: DockerDb, serviceId: string, job: string, at: Date): Promise<boolean> {
  const tickAt = tickTime(at);
  const claimed = await db
    .insertInto('docker_cron_ticks')
    .values({ service_id: serviceId, job, tick_at: tickAt })
    .onConflict((oc) => oc.columns(['service_id', 'job', 'tick_at']).doNothing())
    .returning('service_id')
    .executeTakeFirst();
  if (claimed) {
    await db
      .deleteFrom('docker_cron_ticks')
      .where('service_id', '=', serviceId)
      .where('tick_at', '<', new Date(Date.now() - CLAIMS_KEPT_MS))
      .execute();
  }
  return claimed !== undefined;
}

import type { Deps } from '../domain/usecases/context.ts';
import { pruneEvents } from '../store/repositories/events.ts';
import { repeatEvery } from './every.ts';

/** Retention runs this often: events live a little past BERTH_EVENT_RETENTION_HOURS, never less. */
const PRUNE_EVERY_MS = 10 * 60_000;

/**
 * Drops events older than the retention (config `eventRetentionHours`), so the event log stays bounded.
 * Runs beside the workers; several processes pruning at once is harmless.
 */
export function startEventRetention(
  deps: Pick<Deps, 'store' | 'config' | 'logger'>,
  everyMs = PRUNE_EVERY_MS,
): { stop(): Promise<void> } {
  const log = deps.logger.child({ component: 'event-retention' });
  const prune = async () => {
    const before = new Date(Date.now() - deps.config.eventRetentionHours * 3_600_000);
    const removed = await pruneEvents(deps.store.db, before);
    if (removed > 0) log.info({ removed }, 'events past retention dropped');
  };
  return repeatEvery(everyMs, prune, (err) => log.warn({ err }, 'dropping old events failed'));
}

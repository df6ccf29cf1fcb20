import type { Deps } from '../domain/usecases/context.ts';
import type { ServiceSample } from '../providers/provider.ts';
import {
  compactServiceMetrics,
  insertMinuteSamples,
  minuteOf,
  sampledServices,
} from '../store/repositories/service-metrics.ts';
import { evaluateAlerts } from './alerts.ts';
import { repeatEvery } from './every.ts';

/** The downsample and retention pass: often enough that a day's minutes never wait long to be folded. */
const COMPACT_EVERY_MS = 10 * 60_000;
/** Services sampled at once: the Engine answers a few stats calls in parallel, not hundreds. */
const SAMPLES_AT_ONCE = 8;

type MetricsDeps = Pick<Deps, 'store' | 'provider' | 'logger' | 'config'>;

/**
 * One collection round: asks the provider for a sample of every deployed, live service and stores those
 * that run, as the minute `now` falls in. A service whose sample fails is skipped (and logged), not the
 * round. Returns how many samples were stored.
 */
export async function collectServiceMetrics(deps: MetricsDeps, now = new Date()): Promise<number> {
  const services = await sampledServices(deps.store.db, now);
  const samples: { serviceId: string; at: Date; values: ServiceSample }[] = [];
  let next = 0;
  const sampler = async () => {
    for (let service = services[next++]; service; service = services[next++]) {
      const serviceId = service.id;
      const values = await deps.provider.metrics.sample(service).catch((err: unknown) => {
        deps.logger.warn({ err, serviceId }, 'sampling a service failed');
        return null;
      });
      if (values) samples.push({ serviceId, at: now, values });
    }
  };
  await Promise.all(Array.from({ length: Math.min(SAMPLES_AT_ONCE, services.length) }, sampler));
  await insertMinuteSamples(deps.store.db, samples);
  return samples.length;
}

/**
 * The collector (every BERTH_METRICS_INTERVAL_MS, a minute by default, each round followed by an
 * evaluation of the alert rules; off at 0) and the downsample and retention pass (every ten minutes),
 * beside the workers. Several processes collecting is harmless (a service sampled this minute waits for
 * the next); the pass runs in one process at a time (an advisory lock: the others skip their turn).
 */
export function startServiceMetrics(deps: MetricsDeps): { stop(): Promise<void> } {
  const log = deps.logger.child({ component: 'service-metrics' });
  const every = deps.config.metricsIntervalMs;
  let evaluated = 0;
  const collector =
    every > 0
      ? repeatEvery(
          every,
          async () => {
            const now = new Date();
            const stored = await collectServiceMetrics({ ...deps, logger: log }, now);
            // The alert rules read the minute just stored (one process evaluates; the others skip): once
            // a minute, and again when a later round of it stored more.
            const minute = minuteOf(now).getTime();
            if (stored === 0 && evaluated === minute) return;
            evaluated = minute;
            await evaluateAlerts(deps, now);
          },
          (err) => log.warn({ err }, 'collecting service metrics failed'),
        )
      : null;
  const compactor = repeatEvery(
    COMPACT_EVERY_MS,
    async () => {
      const done = await compactServiceMetrics(deps.store.db, new Date(), deps.config.metricsRetentionDays);
      if (done && (done.dropped > 0 || done.folded > 0)) log.info(done, 'service metrics downsampled');
    },
    (err) => log.warn({ err }, 'downsampling service metrics failed'),
  );
  return {
    stop: async () => {
      await collector?.stop();
      await compactor.stop();
    },
  };
}

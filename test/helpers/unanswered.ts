/**
 * For tests of deadlines: a call that is never answered, a wait with a limit, and a schedule that
 * must go on past a tick that hung.
 * @module
 */
import type { Schedules } from '../../src/providers/engine/schedules.ts';
import { pollUntil } from './poll.ts';

/** A call the other side never answers (a Docker Engine, a socket): it ends only when abandoned. */
export function unanswered(options?: { abortSignal?: AbortSignal }): Promise<never> {
  return new Promise((_, reject) => {
    options?.abortSignal?.addEventListener('abort', () => reject(options.abortSignal?.reason));
  });
}

/** Settles as `work` does, or rejects "still waiting" once `ms` have passed: what a caller waits at most. */
export function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * Counts the calls of a never-answered inspect, and waits (5 s at most) for a second one: the schedule's
 * first tick hung on it, was abandoned, and a later tick ran.
 */
export function hungInspects(): {
  inspect: typeof unanswered;
  aSecondTick: (schedules: Schedules) => Promise<void>;
} {
  let calls = 0;
  return {
    inspect: (options) => {
      calls++;
      return unanswered(options);
    },
    aSecondTick: async (schedules) => {
      await schedules.start();
      try {
        await pollUntil(
          'a second tick after the first one hung',
          async () => (calls >= 2 ? true : undefined),
          {
            timeoutMs: 5000,
          },
        );
      } finally {
        schedules.stop();
      }
    },
  };
}

/** An ops.json cron job of a web service on port 8080. */
export const CRON_JOB = {
  serviceId: 'svc',
  deploymentId: 'dep',
  environmentId: 'env',
  subdomain: 'web',
  port: 8080,
  schedule: '* * * * * *',
  path: '/sync',
};

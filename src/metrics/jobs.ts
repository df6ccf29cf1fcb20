import type { JobHandler, JobHandlers } from '../jobs/worker.ts';
import type { Metrics } from './metrics.ts';

/**
 * The worker's handlers, counted: each run is a claim (and a retry when the job was tried before), timed
 * by outcome and counted as running meanwhile; each `fail` is a job failed for good. Wrapping the
 * handlers leaves the worker's loop as it is.
 */
export function instrumentJobs(handlers: JobHandlers, metrics: Metrics): JobHandlers {
  const counted = (kind: string, handler: JobHandler): JobHandler => ({
    ...handler,
    async run(job, signal, claim) {
      const labels = { kind };
      metrics.jobsClaimed.inc(labels);
      if (job.attempts > 1) metrics.jobsRetried.inc(labels);
      metrics.jobsRunning.inc(labels);
      const end = metrics.jobDuration.startTimer(labels);
      try {
        await handler.run(job, signal, claim);
        end({ outcome: 'done' });
      } catch (error) {
        end({ outcome: 'error' });
        throw error;
      } finally {
        metrics.jobsRunning.dec(labels);
      }
    },
    async fail(job, reason, claim) {
      await handler.fail(job, reason, claim);
      metrics.jobsFailed.inc({ kind });
    },
  });
  return Object.fromEntries(
    Object.entries(handlers).map(([kind, handler]) => [kind, counted(kind, handler)]),
  ) as JobHandlers;
}

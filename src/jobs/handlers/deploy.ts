import type { Deps } from '../../domain/usecases/context.ts';
import { findDeploymentToRun } from '../../store/repositories/deployments.ts';
import type { JobRow } from '../../store/schema.ts';
import { failRun, noteRetry, recordOutcome, rollOut, startRun, watchForCancel } from '../deploy-steps.ts';
import { DeploymentLogWriter } from '../deployment-log.ts';
import type { DeploymentSubject } from '../desired-state.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Carries one deployment out, in named steps (deploy-steps.ts): start the run, roll the one desired
 * state out (desired-state.ts), record the outcome; a retry and a final failure are steps too.
 * Re-entrant: it re-reads the deployment, skips one already terminal, and the provider reports a
 * generation it already applied instead of rolling it out again. A TerminalError from the provider
 * fails the deployment with its message; any other error is retried. What runs afterwards is observed
 * and written back.
 */
export function deployHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const run: { subject?: DeploymentSubject } = {};
      // Armed before the run's one read, which takes the watch's first look at the cancel flag.
      const cancel = await watchForCancel(deps.store, job.subject_id, async () => {
        run.subject = await findDeploymentToRun(db, job.subject_id);
        return run.subject?.deployment.cancel_requested === true;
      });
      try {
        const { subject } = run;
        if (!subject || subject.deployment.state === 'success' || subject.deployment.state === 'failed')
          return;
        const log = new DeploymentLogWriter(db, subject.deployment.id, deps.logger);
        log.mark('claimed');
        if (!(await startRun(db, subject.deployment, job, claim, log))) return;
        const outcome = await rollOut(deps, subject, signal, log, cancel);
        // Another worker may hold the job now: its run records the outcome, not this one.
        if (!outcome || signal.aborted) {
          await log.flush();
          return;
        }
        await recordOutcome(deps, subject, outcome, log, claim);
      } finally {
        cancel.stop();
      }
    },
    retrying: (job: JobRow, reason: string) => noteRetry(deps, job, reason),
    fail: (job: JobRow, reason: string, claim) => failRun(deps, job, reason, claim),
  };
}

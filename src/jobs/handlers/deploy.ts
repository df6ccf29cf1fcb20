import { redactor } from '../../domain/redact.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { maskedValuesOf } from '../../domain/usecases/secrets.ts';
import { appendDeploymentLog } from '../../store/repositories/deployment-logs.ts';
import {
  findDeploymentById,
  findDeploymentToRun,
  noteUnfinishedDeployment,
  transitionDeployment,
} from '../../store/repositories/deployments.ts';
import { followDeployment } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import { recordOutcome, rollOut, startRun } from '../deploy-steps.ts';
import { DeploymentLogWriter } from '../deployment-log.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Carries one deployment out, in named steps (deploy-steps.ts): start the run, roll the one desired
 * state out (desired-state.ts), record the outcome. Re-entrant: it re-reads the deployment, skips one
 * already terminal, and the provider reports a generation it already applied instead of rolling it out
 * again. A TerminalError from the provider fails the deployment with its message; any other error is
 * retried. What runs afterwards is observed and written back.
 */
export function deployHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const maskOf = async (deploymentId: string): Promise<(text: string) => string> => {
    const deployment = await findDeploymentById(db, deploymentId);
    return redactor(deployment ? await maskedValuesOf(db, deps.secretBox, deployment) : []);
  };
  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const subject = await findDeploymentToRun(db, job.subject_id);
      if (!subject || subject.deployment.state === 'success' || subject.deployment.state === 'failed') return;
      const log = new DeploymentLogWriter(db, subject.deployment.id, deps.logger);
      log.mark('claimed');
      if (!(await startRun(db, subject.deployment, job, claim, log))) return;
      const outcome = await rollOut(deps, subject, signal, log);
      // Another worker may hold the job now: its run records the outcome, not this one.
      if (!outcome || signal.aborted) {
        await log.flush();
        return;
      }
      await recordOutcome(deps, subject, outcome, log, claim);
    },
    async retrying(job: JobRow, reason: string) {
      const mask = await maskOf(job.subject_id);
      const note = mask(`Attempt ${job.attempts} of ${job.max_attempts} failed, retrying: ${reason}`).slice(
        0,
        2000,
      );
      await noteUnfinishedDeployment(db, job.subject_id, note);
      await db
        .transaction()
        .execute((trx) =>
          appendDeploymentLog(trx, job.subject_id, [{ step: 'outcome', line: note, at: new Date() }]),
        );
    },
    async fail(job: JobRow, reason: string, claim) {
      const ended = await db.transaction().execute(async (trx) => {
        const deployment = await findDeploymentById(trx, job.subject_id);
        if (!deployment) return undefined;
        const mask = redactor(await maskedValuesOf(trx, deps.secretBox, deployment));
        // A permanent error fails on its first attempt: only a retried one "kept failing".
        const failure = mask(
          job.attempts >= job.max_attempts ? `The provider kept failing: ${reason}` : reason,
        ).slice(0, 2000);
        const moved = await transitionDeployment(trx, deployment.id, ['queued', 'in_progress'], 'failed', {
          failure_reason: failure,
        });
        if (moved) {
          await followDeployment(trx, deployment.service_id, deployment.id, 'deploy_failed');
          const at = new Date();
          await appendDeploymentLog(
            trx,
            deployment.id,
            [{ step: 'outcome', line: `Deployment failed: ${failure}`, at }],
            [{ step: 'outcome', state: 'failed', startedAt: at, finishedAt: at }],
            [{ mark: 'failed', at }],
          );
        }
        // A worker that lost the job fails nothing: the deployment is the holder's to finish.
        await claim.finish(trx);
        return moved ? deployment : undefined;
      });
      if (ended) deps.metrics.deploymentEnded('failed', ended.created_at);
    },
  };
}

import type { Deps } from '../../domain/usecases/context.ts';
import { findEnvironmentById, setEnvironmentState } from '../../store/repositories/environments.ts';
import type { JobRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

export function provisionEnvironmentHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow, _signal, claim) {
      const env = await findEnvironmentById(db, job.subject_id);
      if (env?.state !== 'provisioning') return;
      await deps.provider.ensureEnvironment(env);
      await db.transaction().execute(async (trx) => {
        await setEnvironmentState(trx, env.id, 'available');
        await claim.finish(trx);
      });
    },
    async fail(job: JobRow, _reason, claim) {
      // Fenced: a worker that lost the job cannot fail an environment the one holding it made available.
      await db.transaction().execute(async (trx) => {
        await setEnvironmentState(trx, job.subject_id, 'failed');
        await claim.finish(trx);
      });
    },
  };
}

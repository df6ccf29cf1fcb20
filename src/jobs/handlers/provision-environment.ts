import type { Deps } from '../../domain/usecases/context.ts';
import { findEnvironmentById, setEnvironmentState } from '../../store/repositories/environments.ts';
import type { JobRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

export function provisionEnvironmentHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      const env = await findEnvironmentById(db, job.subject_id);
      if (env?.state !== 'provisioning') return;
      await deps.provider.ensureEnvironment(env);
      await setEnvironmentState(db, env.id, 'available');
    },
    async fail(job: JobRow) {
      await setEnvironmentState(db, job.subject_id, 'failed');
    },
  };
}

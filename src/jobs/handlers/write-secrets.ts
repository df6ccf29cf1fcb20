import type { Deps } from '../../domain/usecases/context.ts';
import { readSecrets } from '../../domain/usecases/secrets.ts';
import { findServiceById } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

/** Writes a scope's current secrets to the provider (the latest set, whatever version queued the job). */
export function writeSecretsHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      // Runtimes without a secret store of their own get variables with each desired state.
      const store = deps.provider.secrets;
      if (!store) return;
      const service = await findServiceById(db, job.subject_id);
      if (service?.is_deleted) return;
      const secrets = await readSecrets(db, deps.secretBox, job.subject_id);
      const values = Object.fromEntries(secrets.map((s) => [s.key, s.value]));
      await store.write(service ? 'service' : 'environment', job.subject_id, values);
    },
    async fail(job: JobRow, reason: string) {
      deps.logger.error({ scope: job.subject_id, reason }, 'secrets could not be written to the provider');
    },
  };
}

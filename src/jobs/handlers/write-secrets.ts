import type { Deps } from '../../domain/usecases/context.ts';
import { readSecrets, type SecretScope } from '../../domain/usecases/secrets.ts';
import { findServiceById } from '../../store/repositories/services.ts';
import type { JobRow } from '../../store/schema.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Writes a scope's current secrets to the provider (the latest set, whatever version queued the job).
 * The scope comes with the job's kind: one handler per scope.
 */
export function writeSecretsHandler(deps: Deps, scope: SecretScope['scope']): JobHandler {
  const { db } = deps.store;
  return {
    async run(job: JobRow) {
      // Runtimes without a secret store of their own get variables with each desired state.
      const store = deps.provider.secrets;
      if (!store) return;
      if (scope === 'service') {
        const service = await findServiceById(db, job.subject_id);
        if (!service || service.is_deleted) return;
      }
      const secrets = await readSecrets(db, deps.secretBox, job.subject_id);
      const values = Object.fromEntries(secrets.map((s) => [s.key, s.value]));
      await store.write(scope, job.subject_id, values);
    },
    async fail(job: JobRow, reason: string) {
      deps.logger.error(
        { scope, id: job.subject_id, reason },
        'secrets could not be written to the provider',
      );
    },
  };
}

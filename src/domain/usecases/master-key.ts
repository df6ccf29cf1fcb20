import { randomBytes } from 'node:crypto';
import { RotationStalledError, rotateSealedValues } from '../../store/key-rotation.ts';
import { loadMasterKeys, retireKeyFile, sealingKeyIds, writeKeyFile } from '../../store/secret-box.ts';
import { ConflictError } from '../errors.ts';
import type { Deps } from './context.ts';

/**
 * `berth admin rotate-master-key`: re-seals every sealed value under the sealing key (BERTH_MASTER_KEY's
 * first) while the server serves. Where Berth generated the key into the data directory, it generates
 * the new one too, unless a rotation to one is under way (then it resumes it). docs/operations.md.
 */
export function rotateMasterKey(deps: Deps): ReturnType<typeof rotate> {
  // A second call while one runs in this process joins it (a generated key is made once).
  running ??= rotate(deps).finally(() => {
    running = undefined;
  });
  return running;
}

let running: ReturnType<typeof rotate> | undefined;

async function rotate(deps: Deps) {
  const { store, secretBox: box, config, logger } = deps;
  const generated = config.masterKey === undefined;
  const inUse = await sealingKeyIds(store.db);
  const settled = inUse.length === 1 && inUse[0] === box.currentId;
  if (settled && generated) {
    const key = randomBytes(32);
    // On disk first: a crash from here on restarts with both keys and resumes.
    writeKeyFile(config.dataDir, [key, ...loadMasterKeys(undefined, config.dataDir)]);
    box.sealWith(key);
  } else if (settled && box.ids().length === 1) {
    throw new ConflictError(
      `every value is sealed with the only key in BERTH_MASTER_KEY (${box.currentId}): to rotate, set ` +
        'BERTH_MASTER_KEY to the new key, a comma, then the current one, restart every Berth process, and run this again',
    );
  }
  logger.info({ key_id: box.currentId }, 'master key rotation started');
  try {
    const { resealed, retired } = await rotateSealedValues(store.db, box, {
      batchSize: config.keyRotationBatch,
      pauseMs: config.keyRotationPauseMs,
      onBatch: (table, count) => logger.info({ table, resealed: count }, 'master key rotation batch'),
    });
    if (generated) retireKeyFile(config.dataDir, box.currentId);
    logger.info({ key_id: box.currentId, resealed, retired }, 'master key rotation done');
    return { key_id: box.currentId, resealed, retired_key_ids: retired };
  } catch (error) {
    if (error instanceof RotationStalledError) throw new ConflictError(error.message);
    throw error;
  }
}

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { RotationStalledError, rotateSealedValues } from '../../src/store/key-rotation.ts';
import { keyId, loadMasterKeys, SecretBox, sealingKeyIds } from '../../src/store/secret-box.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

/** store/key-rotation.ts on its own: rotations racing, and a process that still seals with the old key. */
let h: Harness;
let t: Tenant;
/** Every key so far, newest first (the harness generated the first into its data directory). */
let keys: Buffer[];
before(async () => {
  h = await startHarness();
  t = await h.tenant();
  keys = loadMasterKeys(undefined, h.deps.config.dataDir);
});
after(() => h.close());

const SECRETS = Array.from({ length: 12 }, (_, i) => ({ key: `K_${i}`, value: `value-${i}` }));
const options = { batchSize: 1, pauseMs: 0 };

async function stored(box: SecretBox): Promise<{ ids: Set<string>; values: Record<string, string> }> {
  const rows = await h.deps.store.db.selectFrom('secrets').select(['key', 'value_sealed']).execute();
  return {
    ids: new Set(rows.map((r) => SecretBox.keyIdOf(r.value_sealed))),
    values: Object.fromEntries(rows.map((r) => [r.key, box.open(r.value_sealed)])),
  };
}

test('two rotations racing over the same values both finish: every value is under the new key, none lost', async () => {
  const put = await h.request('PUT', `/v1/environments/${t.envId}/secrets`, {
    token: t.token,
    body: { secrets: SECRETS },
  });
  assert.equal(put.status, 200);
  const oldId = keyId(keys[0] as Buffer);
  keys = [randomBytes(32), ...keys];
  const [first, second] = await Promise.all([
    rotateSealedValues(h.deps.store.db, new SecretBox(keys), options),
    rotateSealedValues(h.deps.store.db, new SecretBox(keys), options),
  ]);
  assert.ok(first.resealed + second.resealed >= SECRETS.length);
  assert.deepEqual([...first.retired, ...second.retired], [oldId]);
  const newId = keyId(keys[0] as Buffer);
  assert.deepEqual(await sealingKeyIds(h.deps.store.db), [newId]);
  const after = await stored(new SecretBox([keys[0] as Buffer]));
  assert.deepEqual(after.ids, new Set([newId]));
  assert.deepEqual(after.values, Object.fromEntries(SECRETS.map((s) => [s.key, s.value])));
});

test('a process still sealing with the old key stalls the rotation (it says so), which finishes once it stops', async () => {
  const straggler = new SecretBox([keys[0] as Buffer]);
  keys = [randomBytes(32), ...keys];
  const box = new SecretBox(keys);
  // It writes a secret under the old key while each batch runs.
  const write = () =>
    h.deps.store.db
      .updateTable('secrets')
      .set({ value_sealed: straggler.seal('written-late') })
      .where('key', '=', 'K_0')
      .execute();
  await assert.rejects(
    rotateSealedValues(h.deps.store.db, box, { ...options, onBatch: () => void write() }),
    (error: Error) =>
      error instanceof RotationStalledError && /a Berth process without this key first/.test(error.message),
  );
  await write();
  assert.equal((await sealingKeyIds(h.deps.store.db)).length, 2, 'both keys are still in use');

  const done = await rotateSealedValues(h.deps.store.db, box, options);
  assert.deepEqual(done.retired, [keyId(keys[1] as Buffer)]);
  const after = await stored(new SecretBox([keys[0] as Buffer]));
  assert.deepEqual(after.ids, new Set([keyId(keys[0] as Buffer)]));
  assert.equal(after.values.K_0, 'written-late');
});

import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import type { Db } from './database.ts';

/**
 * Seals secret values with AES-256-GCM. A sealed value names the key that sealed it
 * (`v1:<key id>:<iv>:<tag>:<ciphertext>`), so keys can rotate: BERTH_MASTER_KEY may list several keys,
 * comma-separated, newest first; the first seals, all of them open (store/key-rotation.ts re-seals).
 */
export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  private current: string;

  constructor(masterKeys: Buffer[]) {
    if (masterKeys.length === 0) throw new Error('at least one master key is needed');
    this.keys = new Map(masterKeys.map((key) => [keyId(key), key]));
    this.current = keyId(masterKeys[0] as Buffer);
  }

  get currentId(): string {
    return this.current;
  }

  hasKey(id: string): boolean {
    return this.keys.has(id);
  }

  /** The ids of the keys it holds, the sealing one first. */
  ids(): string[] {
    return [this.current, ...[...this.keys.keys()].filter((id) => id !== this.current)];
  }

  /** A new key seals from now on; the others still open. */
  sealWith(key: Buffer): void {
    this.current = keyId(key);
    this.keys.set(this.current, key);
  }

  /** The id of the key `sealed` was sealed with. */
  static keyIdOf(sealed: string): string {
    return sealed.split(':', 2)[1] ?? '';
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentId) as Buffer, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [
      'v1',
      this.currentId,
      iv.toString('base64'),
      tag.toString('base64'),
      ciphertext.toString('base64'),
    ].join(':');
  }

  open(sealed: string): string {
    const [version, id, iv, tag, ciphertext] = sealed.split(':');
    const key = id ? this.keys.get(id) : undefined;
    if (version !== 'v1' || !key || !iv || !tag || ciphertext === undefined) {
      throw new Error(`cannot open a secret sealed with key ${id ?? '?'}: add that key to BERTH_MASTER_KEY`);
    }
    // A fixed tag length: a shortened tag would otherwise be accepted with less protection.
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'), { authTagLength: 16 });
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64')), decipher.final()]).toString(
      'utf8',
    );
  }
}

export function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

export class MasterKeyError extends Error {}

function parseKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== 32) {
    throw new MasterKeyError(
      'BERTH_MASTER_KEY must hold 32-byte keys, as 64 hex digits or base64, comma-separated',
    );
  }
  return key;
}

function parseKeys(text: string): Buffer[] {
  return text
    .split(/[,\n]/)
    .filter((k) => k.trim())
    .map(parseKey);
}

export const keyFileOf = (dataDir: string) => path.join(dataDir, 'master.key');

/**
 * The configured keys, or those generated into the data directory (mode 0600): one on first use, and
 * during a rotation of a generated key the new one above the old one (one per line, newest first).
 */
export function loadMasterKeys(configured: string | undefined, dataDir: string): Buffer[] {
  if (configured) return parseKeys(configured);
  const file = keyFileOf(dataDir);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    try {
      fs.writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (error) {
      // Another process sharing the directory wrote it first: use theirs.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  return parseKeys(fs.readFileSync(file, 'utf8'));
}

/**
 * Ends a rotation of the generated key: the key file keeps only the sealing key; the retired ones go to
 * master.key.retired, as backups taken before the rotation still need them.
 */
export function retireKeyFile(dataDir: string, currentId: string): void {
  const keys = loadMasterKeys(undefined, dataDir);
  const retired = keys.filter((k) => keyId(k) !== currentId);
  if (retired.length === 0) return;
  fs.appendFileSync(`${keyFileOf(dataDir)}.retired`, retired.map((k) => `${k.toString('hex')}\n`).join(''), {
    mode: 0o600,
  });
  writeKeyFile(
    dataDir,
    keys.filter((k) => keyId(k) === currentId),
  );
}

/** Replaces the generated key file in one step (a crash leaves the old file or the new one, never half). */
export function writeKeyFile(dataDir: string, keys: Buffer[]): void {
  const file = keyFileOf(dataDir);
  const next = `${file}.next`;
  fs.writeFileSync(next, keys.map((k) => `${k.toString('hex')}\n`).join(''), { mode: 0o600 });
  fs.renameSync(next, file);
}

const KEY_IDS = 'master_key_ids';

/**
 * The ids of the keys values may be sealed with, comma-separated, in settings: one, except from the
 * moment a process seals with a new key until a rotation (store/key-rotation.ts) has re-sealed
 * everything under it.
 */
export async function sealingKeyIds(db: Db): Promise<string[]> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', KEY_IDS).executeTakeFirst();
  return row ? row.value.split(',') : [];
}

/** Records that values may be sealed with `id`, before anything is. */
export async function recordSealingKey(db: Db, id: string): Promise<void> {
  await db
    .insertInto('settings')
    .values({ key: KEY_IDS, value: id })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  await sql`UPDATE settings SET value = value || ',' || ${id}
            WHERE key = ${KEY_IDS} AND NOT (${id} = ANY (string_to_array(value, ',')))`.execute(db);
}

/** Ends a rotation: only `id` seals values now, unless the recorded ids are no longer `were` (then false). */
export async function retireSealingKeys(db: Db, were: string[], id: string): Promise<boolean> {
  const done = await db
    .updateTable('settings')
    .set({ value: id })
    .where('key', '=', KEY_IDS)
    .where('value', '=', were.join(','))
    .executeTakeFirst();
  return done.numUpdatedRows === 1n;
}

/**
 * Every process of one installation must hold every key its values are sealed with. The first process
 * records its key's id in the database; any later one without a recorded key refuses to start, instead
 * of failing on the first secret it reads (a worker with another data directory would generate its own).
 * A process whose first key is new records it before sealing with it: from then on every process needs
 * it too, until a rotation retires the old one.
 */
export async function checkMasterKey(db: Db, box: SecretBox): Promise<void> {
  const missing = (await sealingKeyIds(db)).filter((id) => !box.hasKey(id));
  if (missing.length > 0) {
    throw new MasterKeyError(
      `this database's secrets are sealed with the master key ${missing.join(', ')}, which this process does not have ` +
        `(it has ${box.ids().join(', ')}). Give every Berth process the same BERTH_MASTER_KEY ` +
        '(or the same BERTH_DATA_DIR, where the generated key lives); during a key rotation, the new key first, then the old one ' +
        '(docs/operations.md).',
    );
  }
  await recordSealingKey(db, box.currentId);
}

import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Db } from './database.ts';

/**
 * Seals secret values with AES-256-GCM. A sealed value names the key that sealed it
 * (`v1:<key id>:<iv>:<tag>:<ciphertext>`), so keys can rotate: BERTH_MASTER_KEY may list several keys,
 * comma-separated, newest first; the first seals, all of them open.
 */
export class SecretBox {
  private readonly keys: Map<string, Buffer>;
  readonly currentId: string;

  constructor(masterKeys: Buffer[]) {
    if (masterKeys.length === 0) throw new Error('at least one master key is needed');
    this.keys = new Map(masterKeys.map((key) => [keyId(key), key]));
    this.currentId = keyId(masterKeys[0] as Buffer);
  }

  hasKey(id: string): boolean {
    return this.keys.has(id);
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

function keyId(key: Buffer): string {
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

/** The configured keys, or the one generated into the data directory (mode 0600) on first use. */
export function loadMasterKeys(configured: string | undefined, dataDir: string): Buffer[] {
  if (configured)
    return configured
      .split(',')
      .filter((k) => k.trim())
      .map(parseKey);
  const file = path.join(dataDir, 'master.key');
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    try {
      fs.writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (error) {
      // Another process sharing the directory wrote it first: use theirs.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  return [parseKey(fs.readFileSync(file, 'utf8'))];
}

/**
 * Every process of one installation must hold the key its secrets are sealed with. The first process
 * records its key's id in the database; any later one without that key refuses to start, instead of
 * failing on the first secret it reads (a worker with another data directory would generate its own).
 */
export async function checkMasterKey(db: Db, box: SecretBox): Promise<void> {
  await db
    .insertInto('settings')
    .values({ key: 'master_key_id', value: box.currentId })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db
    .selectFrom('settings')
    .select('value')
    .where('key', '=', 'master_key_id')
    .executeTakeFirstOrThrow();
  if (!box.hasKey(row.value)) {
    throw new MasterKeyError(
      `this database's secrets are sealed with the master key ${row.value}, which this process does not have ` +
        `(it has ${box.currentId}). Give every Berth process the same BERTH_MASTER_KEY ` +
        '(or the same BERTH_DATA_DIR, where the generated key lives).',
    );
  }
}

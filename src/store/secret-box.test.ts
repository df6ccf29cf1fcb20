import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadMasterKeys, MasterKeyError, SecretBox } from './secret-box.ts';

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-secret-box-'));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** Splits a sealed value into its parts: v1, key id, iv, tag, ciphertext. */
function partsOf(sealed: string) {
  const [version, id, iv, tag, ciphertext] = sealed.split(':') as [string, string, string, string, string];
  return { version, id, iv, tag, ciphertext };
}
const join = (p: ReturnType<typeof partsOf>) => [p.version, p.id, p.iv, p.tag, p.ciphertext].join(':');
function flipFirstBit(b64: string): string {
  const buf = Buffer.from(b64, 'base64');
  buf[0] = (buf[0] as number) ^ 1;
  return buf.toString('base64');
}

describe('SecretBox', () => {
  const box = new SecretBox([randomBytes(32)]);

  test('opens what it sealed', () => {
    for (const plaintext of ['hunter2', '', 'ünïcødé ✓ 🔑', 'a:b:c', 'x'.repeat(100_000)]) {
      assert.equal(box.open(box.seal(plaintext)), plaintext);
    }
  });

  test('the sealed text is v1:<key id>:... and does not contain the plaintext', () => {
    const plaintext = 'postgres://user:very-secret-password@db/app';
    const sealed = box.seal(plaintext);
    const p = partsOf(sealed);
    assert.equal(p.version, 'v1');
    assert.match(p.id, /^[0-9a-f]{12}$/);
    assert.equal(Buffer.from(p.iv, 'base64').length, 12);
    assert.equal(Buffer.from(p.tag, 'base64').length, 16);
    assert.ok(!sealed.includes(plaintext));
    assert.ok(!sealed.includes('very-secret-password'));
    assert.ok(!sealed.includes(Buffer.from(plaintext).toString('base64')));
  });

  test('each seal uses a fresh IV, so equal plaintexts seal differently', () => {
    const sealed = Array.from({ length: 50 }, () => box.seal('same value'));
    assert.equal(new Set(sealed).size, 50);
    assert.equal(new Set(sealed.map((s) => partsOf(s).iv)).size, 50);
    for (const s of sealed) assert.equal(box.open(s), 'same value');
  });

  test('a changed ciphertext is detected', () => {
    const p = partsOf(box.seal('do not touch'));
    assert.throws(() => box.open(join({ ...p, ciphertext: flipFirstBit(p.ciphertext) })));
  });

  test('a changed tag is detected', () => {
    const p = partsOf(box.seal('do not touch'));
    assert.throws(() => box.open(join({ ...p, tag: flipFirstBit(p.tag) })));
  });

  test('a changed IV is detected', () => {
    const p = partsOf(box.seal('do not touch'));
    assert.throws(() => box.open(join({ ...p, iv: flipFirstBit(p.iv) })));
  });

  test('a truncated tag is detected', () => {
    // GCM accepts shorter tags unless the tag length is pinned; a 4-byte prefix of the real tag would
    // then verify, leaving 32 bits of integrity instead of 128.
    const p = partsOf(box.seal('do not touch'));
    const short = Buffer.from(p.tag, 'base64').subarray(0, 4).toString('base64');
    assert.throws(() => box.open(join({ ...p, tag: short })));
  });

  test('ciphertext moved from another value is detected', () => {
    const a = partsOf(box.seal('aaaa'));
    const b = partsOf(box.seal('bbbb'));
    assert.throws(() => box.open(join({ ...a, ciphertext: b.ciphertext })));
  });

  test('a value that is not a sealed value gives an error, not garbage', () => {
    for (const bad of ['', 'plaintext', 'v2:abc:def:ghi:jkl', 'v1', 'v1:nope']) {
      assert.throws(() => box.open(bad), Error, JSON.stringify(bad));
    }
  });

  test('at least one key is needed', () => {
    assert.throws(() => new SecretBox([]), /at least one master key/);
  });

  describe('rotation', () => {
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const oldBox = new SecretBox([oldKey]);
    const rotated = new SecretBox([newKey, oldKey]);

    test('a box with [newKey, oldKey] opens values sealed by the old key', () => {
      const sealedByOld = oldBox.seal('from before the rotation');
      assert.equal(rotated.open(sealedByOld), 'from before the rotation');
    });

    test('it seals with the new key: the old key alone cannot open the result', () => {
      const sealed = rotated.seal('after the rotation');
      assert.notEqual(partsOf(sealed).id, partsOf(oldBox.seal('x')).id);
      assert.equal(partsOf(sealed).id, partsOf(new SecretBox([newKey]).seal('x')).id);
      assert.equal(new SecretBox([newKey]).open(sealed), 'after the rotation');
      assert.throws(() => oldBox.open(sealed));
    });

    test('a box without the key gives a clear error naming the key id', () => {
      const sealed = oldBox.seal('orphan');
      const { id } = partsOf(sealed);
      const withoutOld = new SecretBox([newKey]);
      assert.throws(
        () => withoutOld.open(sealed),
        (error: Error) => {
          assert.ok(error.message.includes(id), error.message);
          assert.match(error.message, /BERTH_MASTER_KEY/);
          assert.ok(!error.message.includes('orphan'));
          return true;
        },
      );
    });

    test('the key id is derived from the key: the same key gives the same id in every box', () => {
      const id1 = partsOf(new SecretBox([oldKey]).seal('a')).id;
      const id2 = partsOf(new SecretBox([Buffer.from(oldKey)]).seal('b')).id;
      assert.equal(id1, id2);
    });
  });
});

describe('loadMasterKeys', () => {
  const key = randomBytes(32);

  test('reads a 64-digit hex key, in either case', () => {
    const dir = tempDir();
    assert.deepEqual(loadMasterKeys(key.toString('hex'), dir), [key]);
    assert.deepEqual(loadMasterKeys(key.toString('hex').toUpperCase(), dir), [key]);
    assert.equal(fs.existsSync(path.join(dir, 'master.key')), false, 'a configured key writes no file');
  });

  test('reads a base64 key', () => {
    assert.deepEqual(loadMasterKeys(key.toString('base64'), tempDir()), [key]);
  });

  test('reads several comma-separated keys in order, tolerating spaces and empty items', () => {
    const other = randomBytes(32);
    const keys = loadMasterKeys(` ${key.toString('hex')} , ${other.toString('base64')},`, tempDir());
    assert.deepEqual(keys, [key, other]);
  });

  test('a key of the wrong length is a MasterKeyError', () => {
    for (const bad of [
      randomBytes(16).toString('hex'),
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      `${key.toString('hex')}00`,
      'not a key at all',
      `${key.toString('hex')},${randomBytes(16).toString('hex')}`,
    ]) {
      assert.throws(() => loadMasterKeys(bad, tempDir()), MasterKeyError, bad);
    }
  });

  test('the MasterKeyError says what a key must look like', () => {
    assert.throws(() => loadMasterKeys('abcd', tempDir()), /32-byte.*hex.*base64/);
  });

  test('without a configured key one is generated into the data directory with mode 0600', () => {
    const dir = path.join(tempDir(), 'nested', 'data');
    const [generated] = loadMasterKeys(undefined, dir);
    assert.equal(generated?.length, 32);
    const file = path.join(dir, 'master.key');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(fs.readFileSync(file, 'utf8').trim(), generated?.toString('hex'));
  });

  test('the generated key is reused on the next start', () => {
    const dir = tempDir();
    const [first] = loadMasterKeys(undefined, dir);
    const [second] = loadMasterKeys(undefined, dir);
    const [third] = loadMasterKeys('', dir);
    assert.ok(first && second && third);
    assert.ok(first.equals(second));
    assert.ok(first.equals(third));
    // And it keeps opening what it sealed.
    assert.equal(new SecretBox([second]).open(new SecretBox([first]).seal('kept')), 'kept');
  });

  test('different data directories get different keys', () => {
    const [a] = loadMasterKeys(undefined, tempDir());
    const [b] = loadMasterKeys(undefined, tempDir());
    assert.ok(a && b && !a.equals(b));
  });

  test('an existing key file is used as it is', () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'master.key'), `${key.toString('base64')}\n`, { mode: 0o600 });
    assert.deepEqual(loadMasterKeys(undefined, dir), [key]);
  });

  test('a damaged key file is a MasterKeyError, not a silently new key', () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'master.key'), 'abcd\n', { mode: 0o600 });
    assert.throws(() => loadMasterKeys(undefined, dir), MasterKeyError);
    assert.equal(fs.readFileSync(path.join(dir, 'master.key'), 'utf8'), 'abcd\n');
  });
});

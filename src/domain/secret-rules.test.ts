import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkSecrets, mergeSecrets, type StoredSecret } from './secret-rules.ts';

const T0 = new Date('2024-01-01T00:00:00.000Z');
const T1 = new Date('2024-06-01T12:00:00.000Z');

function stored(key: string, value: string, extra: Partial<StoredSecret> = {}): StoredSecret {
  return {
    key,
    value,
    is_sensitive: false,
    description: '',
    use_preview: false,
    expose_to_chart: null,
    chart_default_val: null,
    dep_export: null,
    updated_at: T0,
    ...extra,
  };
}

describe('checkSecrets', () => {
  test('distinct non-empty keys pass', () => {
    assert.deepEqual(checkSecrets([{ key: 'A', value: '1' }, { key: 'B' }], 'secrets'), {
      errors: [],
      duplicate: null,
    });
  });

  test('an empty array passes', () => {
    assert.deepEqual(checkSecrets([], 'secrets'), { errors: [], duplicate: null });
  });

  test('a key that is empty after trimming is a field error naming its index', () => {
    const { errors, duplicate } = checkSecrets(
      [{ key: 'OK' }, { key: '' }, { key: 'ALSO_OK' }, { key: ' \t ' }],
      'secrets',
    );
    assert.deepEqual(errors, [
      { field: 'secrets[1].key', error: 'secrets[1].key must not be empty' },
      { field: 'secrets[3].key', error: 'secrets[3].key must not be empty' },
    ]);
    assert.equal(duplicate, null);
  });

  test('the field prefix is the one given', () => {
    const { errors } = checkSecrets([{ key: ' ' }], 'env_secrets');
    assert.deepEqual(
      errors.map((e) => e.field),
      ['env_secrets[0].key'],
    );
  });

  test('a repeated key is reported as the duplicate, compared after trimming', () => {
    assert.equal(checkSecrets([{ key: 'A' }, { key: 'B' }, { key: 'A' }], 'secrets').duplicate, 'A');
    assert.equal(checkSecrets([{ key: 'TOKEN' }, { key: '  TOKEN ' }], 'secrets').duplicate, 'TOKEN');
  });

  test('the first repeated key is the one reported', () => {
    const { duplicate } = checkSecrets([{ key: 'A' }, { key: 'B' }, { key: 'B' }, { key: 'A' }], 'secrets');
    assert.equal(duplicate, 'B');
  });

  test('keys are case-sensitive: A and a are different keys', () => {
    assert.equal(checkSecrets([{ key: 'A' }, { key: 'a' }], 'secrets').duplicate, null);
  });

  test('a key that cannot be an environment variable name is a field error saying what a key may contain', () => {
    const bad = ['A=B', '1ABC', 'MY-KEY', 'has space', 'a.b', 'ÄPFEL', 'x\u0000y', '$HOME'];
    const { errors, duplicate } = checkSecrets(
      bad.map((key) => ({ key })),
      'secrets',
    );
    assert.deepEqual(
      errors,
      bad.map((_key, i) => ({
        field: `secrets[${i}].key`,
        error: `secrets[${i}].key must be an environment variable name: letters, digits and underscores, not starting with a digit`,
      })),
    );
    assert.equal(duplicate, null);
  });

  test('POSIX names pass, __proto__ and constructor included; they are trimmed first', () => {
    const good = ['A', '_', 'a_b_1', 'PATH', '__proto__', 'constructor', '  SPACED  '];
    assert.deepEqual(
      checkSecrets(
        good.map((key) => ({ key })),
        'secrets',
      ),
      { errors: [], duplicate: null },
    );
  });

  test('two empty keys are two field errors, not a duplicate', () => {
    const { errors, duplicate } = checkSecrets([{ key: '' }, { key: ' ' }], 'secrets');
    assert.equal(errors.length, 2);
    assert.equal(duplicate, null);
  });
});

describe('mergeSecrets', () => {
  test('a full replace: keys not sent are removed, new keys are added', () => {
    const current = [stored('A', 'a'), stored('B', 'b')];
    const next = mergeSecrets(
      current,
      [
        { key: 'B', value: 'b' },
        { key: 'C', value: 'c' },
      ],
      T1,
    );
    assert.deepEqual(
      next.map((s) => [s.key, s.value]),
      [
        ['B', 'b'],
        ['C', 'c'],
      ],
    );
  });

  test('an empty array removes everything', () => {
    assert.deepEqual(mergeSecrets([stored('A', 'a', { is_sensitive: true })], [], T1), []);
  });

  test('a new entry gets defaults for what it leaves out, and the new time', () => {
    const [s] = mergeSecrets([], [{ key: 'NEW' }], T1);
    assert.deepEqual(s, {
      key: 'NEW',
      value: '',
      is_sensitive: false,
      description: '',
      use_preview: false,
      expose_to_chart: null,
      chart_default_val: null,
      dep_export: null,
      updated_at: T1,
    });
  });

  test('all fields sent are stored', () => {
    const [s] = mergeSecrets(
      [],
      [
        {
          key: 'K',
          value: 'v',
          description: 'd',
          use_preview: true,
          is_sensitive: true,
          expose_to_chart: true,
          chart_default_val: 'x',
          dep_export: false,
        },
      ],
      T1,
    );
    assert.deepEqual(s, {
      key: 'K',
      value: 'v',
      description: 'd',
      use_preview: true,
      is_sensitive: true,
      expose_to_chart: true,
      chart_default_val: 'x',
      dep_export: false,
      updated_at: T1,
    });
  });

  test('keys are trimmed, and a trimmed key matches the stored one', () => {
    const current = [stored('API_KEY', 'secret', { is_sensitive: true })];
    const [s] = mergeSecrets(current, [{ key: '  API_KEY  ', is_sensitive: true }], T1);
    assert.equal(s?.key, 'API_KEY');
    assert.equal(s?.value, 'secret');
    assert.equal(s?.updated_at, T0);
  });

  test('a stored sensitive key sent without a value keeps its value', () => {
    const current = [stored('DB_PASSWORD', 'hunter2', { is_sensitive: true })];
    const [s] = mergeSecrets(current, [{ key: 'DB_PASSWORD', is_sensitive: true }], T1);
    assert.equal(s?.value, 'hunter2');
    assert.equal(s?.is_sensitive, true);
  });

  test('flipping is_sensitive to false without a value cannot reveal the stored value', () => {
    const current = [stored('DB_PASSWORD', 'hunter2', { is_sensitive: true })];
    for (const entry of [{ key: 'DB_PASSWORD', is_sensitive: false }, { key: 'DB_PASSWORD' }]) {
      const [s] = mergeSecrets(current, [entry], T1);
      assert.equal(s?.is_sensitive, true, JSON.stringify(entry));
      assert.equal(s?.value, 'hunter2');
    }
  });

  test('a sensitive key can be made non-sensitive by sending a new value', () => {
    const current = [stored('DB_PASSWORD', 'hunter2', { is_sensitive: true })];
    const [s] = mergeSecrets(current, [{ key: 'DB_PASSWORD', value: 'public', is_sensitive: false }], T1);
    assert.equal(s?.value, 'public');
    assert.equal(s?.is_sensitive, false);
    assert.equal(s?.updated_at, T1);
  });

  test('a sensitive value can be overwritten, even with an empty string', () => {
    const current = [stored('S', 'old', { is_sensitive: true })];
    assert.equal(
      mergeSecrets(current, [{ key: 'S', value: 'new', is_sensitive: true }], T1)[0]?.value,
      'new',
    );
    assert.equal(mergeSecrets(current, [{ key: 'S', value: '', is_sensitive: true }], T1)[0]?.value, '');
  });

  test('a non-sensitive key sent without a value is written as empty (a full replace, not a merge)', () => {
    const current = [stored('PLAIN', 'visible')];
    const [s] = mergeSecrets(current, [{ key: 'PLAIN' }], T1);
    assert.equal(s?.value, '');
    assert.equal(s?.updated_at, T1);
  });

  test('keeping the value still applies the other fields sent', () => {
    const current = [stored('S', 'v', { is_sensitive: true, description: 'old' })];
    const [s] = mergeSecrets(current, [{ key: 'S', description: 'new', use_preview: true }], T1);
    assert.equal(s?.value, 'v');
    assert.equal(s?.description, 'new');
    assert.equal(s?.use_preview, true);
    assert.equal(s?.updated_at, T1);
  });

  test('an entry that changes nothing keeps its updated_at; a changed one gets the new time', () => {
    const current = [
      stored('SAME', '1', { description: 'd', use_preview: true, dep_export: true }),
      stored('VALUE', '1'),
      stored('DESC', '1', { description: 'x' }),
      stored('FLAG', '1'),
      stored('SENS', 's', { is_sensitive: true }),
    ];
    const next = mergeSecrets(
      current,
      [
        { key: 'SAME', value: '1', description: 'd', use_preview: true, dep_export: true },
        { key: 'VALUE', value: '2' },
        { key: 'DESC', value: '1', description: 'y' },
        { key: 'FLAG', value: '1', expose_to_chart: true },
        { key: 'SENS' },
      ],
      T1,
    );
    assert.deepEqual(Object.fromEntries(next.map((s) => [s.key, s.updated_at.toISOString()])), {
      SAME: T0.toISOString(),
      VALUE: T1.toISOString(),
      DESC: T1.toISOString(),
      FLAG: T1.toISOString(),
      SENS: T0.toISOString(),
    });
  });

  test('a key removed and added back in a later write is new', () => {
    const afterRemove = mergeSecrets([stored('A', 'a')], [], T1);
    const [s] = mergeSecrets(afterRemove, [{ key: 'A', value: 'a' }], T1);
    assert.equal(s?.updated_at, T1);
  });

  test('the order of the result is the order of the entries sent', () => {
    const next = mergeSecrets(
      [stored('A', '1'), stored('B', '2')],
      [{ key: 'Z' }, { key: 'B', value: '2' }, { key: 'A', value: '1' }],
      T1,
    );
    assert.deepEqual(
      next.map((s) => s.key),
      ['Z', 'B', 'A'],
    );
  });

  test('the current secrets are not modified', () => {
    const current = [stored('S', 'v', { is_sensitive: true })];
    const copy = structuredClone(current);
    mergeSecrets(current, [{ key: 'S', value: 'changed', is_sensitive: false }], T1);
    assert.deepEqual(current, copy);
  });
});

import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { bearerToken, hashApiToken, newApiToken } from './api-token.ts';
import { isUuid } from './uuid.ts';

const TOKEN = '3f2b8c4e-9a1d-4e6f-8b7a-0c5d2e1f9a3b';

describe('newApiToken', () => {
  test('issues distinct v4 UUIDs', () => {
    const tokens = Array.from({ length: 50 }, () => newApiToken());
    for (const token of tokens) {
      assert.match(token, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    assert.equal(new Set(tokens).size, tokens.length);
  });
});

describe('hashApiToken', () => {
  test('is the hex SHA-256 of the lower-cased token, never the token itself', () => {
    const hash = hashApiToken(TOKEN);
    assert.match(hash, /^[0-9a-f]{64}$/);
    assert.equal(hash, createHash('sha256').update(TOKEN).digest('hex'));
    assert.ok(!hash.includes(TOKEN.replace(/-/g, '')));
  });

  test('is stable across calls', () => {
    assert.equal(hashApiToken(TOKEN), hashApiToken(TOKEN));
  });

  test('is case-insensitive, like the UUID it hashes', () => {
    assert.equal(hashApiToken(TOKEN.toUpperCase()), hashApiToken(TOKEN));
    assert.equal(hashApiToken('3F2B8C4E-9a1d-4E6F-8b7a-0C5D2E1F9A3B'), hashApiToken(TOKEN));
  });

  test('different tokens have different hashes', () => {
    const hashes = new Set(Array.from({ length: 50 }, () => hashApiToken(randomUUID())));
    assert.equal(hashes.size, 50);
    assert.notEqual(hashApiToken(TOKEN), hashApiToken(TOKEN.replace(/b$/, 'c')));
  });
});

describe('isUuid', () => {
  test('accepts UUIDs in either case', () => {
    assert.equal(isUuid(TOKEN), true);
    assert.equal(isUuid(TOKEN.toUpperCase()), true);
    assert.equal(isUuid('00000000-0000-0000-0000-000000000000'), true);
  });

  test('refuses anything else', () => {
    for (const value of [
      '',
      'not-a-uuid',
      TOKEN.replace(/-/g, ''),
      `${TOKEN}0`,
      TOKEN.slice(1),
      `{${TOKEN}}`,
      ` ${TOKEN}`,
      `${TOKEN}\n`,
      TOKEN.replace('3f', 'zz'),
      'urn:uuid:3f2b8c4e-9a1d-4e6f-8b7a-0c5d2e1f9a3b',
    ]) {
      assert.equal(isUuid(value), false, JSON.stringify(value));
    }
  });
});

describe('bearerToken', () => {
  test('reads the token from a well-formed header', () => {
    assert.equal(bearerToken(`Bearer ${TOKEN}`), TOKEN);
  });

  test('the scheme is case-insensitive and extra spaces around the token are tolerated', () => {
    assert.equal(bearerToken(`bearer ${TOKEN}`), TOKEN);
    assert.equal(bearerToken(`BEARER ${TOKEN}`), TOKEN);
    assert.equal(bearerToken(`Bearer   ${TOKEN}`), TOKEN);
    assert.equal(bearerToken(`Bearer ${TOKEN}  `), TOKEN);
  });

  test('keeps the case of the token as sent (hashing makes it irrelevant)', () => {
    assert.equal(bearerToken(`Bearer ${TOKEN.toUpperCase()}`), TOKEN.toUpperCase());
  });

  test('a missing or malformed header gives null', () => {
    for (const header of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      TOKEN,
      `Basic ${TOKEN}`,
      `Token ${TOKEN}`,
      `Bearer${TOKEN}`,
      'Bearer not-a-uuid',
      `Bearer ${TOKEN} extra`,
      `Bearer ${TOKEN},${TOKEN}`,
      `Bearer "${TOKEN}"`,
      `Bearer ${TOKEN.replace(/-/g, '')}`,
      `Bearer: ${TOKEN}`,
      `Bearer Bearer ${TOKEN}`,
    ]) {
      assert.equal(bearerToken(header), null, JSON.stringify(header));
    }
  });
});

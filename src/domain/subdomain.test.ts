import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generateSubdomain, kubeSecretNames } from './subdomain.ts';

const SUFFIX = /^[a-z0-9]{8}$/;

/** Splits a subdomain into the name part (first 4 characters) and the random suffix. */
function parts(subdomain: string): { prefix: string; suffix: string } {
  const match = /^(.*)-([^-]*)$/.exec(subdomain);
  assert.ok(match, subdomain);
  return { prefix: match[1] as string, suffix: match[2] as string };
}

describe('generateSubdomain', () => {
  test('the first four characters of the name, lower-cased, then a hyphen and 8 alphanumerics', () => {
    const subdomain = generateSubdomain('Payments');
    assert.match(subdomain, /^paym-[a-z0-9]{8}$/);
    assert.equal(subdomain.length, 13);
  });

  test('spaces in the first four characters become hyphens', () => {
    assert.match(generateSubdomain('My App'), /^my-a-[a-z0-9]{8}$/);
    assert.match(generateSubdomain('Web App'), /^web--[a-z0-9]{8}$/);
    assert.match(generateSubdomain('A B C D'), /^a-b--[a-z0-9]{8}$/);
  });

  test('only the first four characters count', () => {
    const { prefix } = parts(generateSubdomain('ABCDEFGHIJ'));
    assert.equal(prefix, 'abcd');
  });

  test('a three-character name gives a three-character prefix', () => {
    assert.match(generateSubdomain('Api'), /^api-[a-z0-9]{8}$/);
  });

  test('hyphens in a patched name are kept as they are', () => {
    assert.match(generateSubdomain('a-bc'), /^a-bc-[a-z0-9]{8}$/);
  });

  test('the result is a valid DNS label for names that pass the create rules', () => {
    for (const name of ['My Great Service', 'Zed', 'UPPER CASE']) {
      const subdomain = generateSubdomain(name);
      assert.match(subdomain, /^[a-z0-9-]{1,63}$/, subdomain);
      assert.ok(!subdomain.startsWith('-'), subdomain);
    }
  });

  test('the suffix is random: many calls give distinct values drawn from letters and digits', () => {
    const suffixes = Array.from({ length: 500 }, () => parts(generateSubdomain('Same Name')).suffix);
    for (const suffix of suffixes) assert.match(suffix, SUFFIX);
    assert.equal(new Set(suffixes).size, suffixes.length);
    const chars = new Set(suffixes.join(''));
    // 4000 draws from 36 characters: every one of them shows up, letters and digits alike.
    assert.equal(chars.size, 36);
    assert.ok([...chars].some((c) => /\d/.test(c)));
    assert.ok([...chars].some((c) => /[a-z]/.test(c)));
  });

  test('no character dominates the suffix (rough uniformity check)', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2000; i++) {
      for (const c of parts(generateSubdomain('Even')).suffix) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    // 16000 draws over 36 characters: about 444 each; a sound generator stays far inside 200..800.
    for (const [c, n] of counts) assert.ok(n > 200 && n < 800, `${c} appeared ${n} times`);
  });
});

describe('kubeSecretNames', () => {
  test('derives the three provider-side secret names from the subdomain', () => {
    assert.deepEqual(kubeSecretNames('my-a-abc12345'), {
      kube_secret: 'my-a-abc12345-secrets',
      kube_dep_secret: 'my-a-abc12345-dep-secrets',
      kube_preview_dep_secret: 'my-a-abc12345-preview-dep-secrets',
    });
  });
});

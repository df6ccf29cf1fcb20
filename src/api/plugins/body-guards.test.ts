import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nestsDeeperThan } from './body-guards.ts';

test('depth counts open arrays and objects, not brackets inside strings', () => {
  assert.equal(nestsDeeperThan('{"a":[1,{"b":2}]}', 3), false);
  assert.equal(nestsDeeperThan('{"a":[1,{"b":2}]}', 2), true);
  assert.equal(nestsDeeperThan(`{"a":"${'['.repeat(1000)}"}`, 1), false);
  // An escaped quote does not end the string; an escaped backslash does not escape the quote after it.
  assert.equal(nestsDeeperThan('{"a":"\\"[[[[","b":"\\\\"}', 1), false);
  assert.equal(nestsDeeperThan('["\\\\",[[]]]', 2), true);
  assert.equal(nestsDeeperThan('[[],[],[]]', 2), false);
});

test('a 100,000-deep document is refused without recursing', () => {
  assert.equal(nestsDeeperThan('['.repeat(100_000), 64), true);
  assert.equal(nestsDeeperThan(`${'{"a":'.repeat(64)}1${'}'.repeat(64)}`, 64), false);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import dotenv from 'dotenv';
import { unreadableLines } from './dotenv-lines.ts';

test('what dotenv reads is readable: pairs, export, colons, comments, blank lines and quoted values over lines', () => {
  const text = [
    '# settings',
    '',
    'A=1',
    'export B = two',
    'C: three',
    'D="line one',
    'line two"',
    "E='it''s'",
    'F=`a',
    '  b`',
    'G="escaped \\" quote',
    'still G"',
    'H=',
    'I.J-K=x # a comment',
  ].join('\n');
  assert.deepEqual(unreadableLines(text), []);
  assert.deepEqual(Object.keys(dotenv.parse(text)), ['A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I.J-K']);
});

test('the lines dotenv would skip are named by number and what stands before their =, never the value', () => {
  const text = 'A=1\nDATABASE URL=postgres://x\n=3\nBAD LINE\r\nB=2\n';
  assert.deepEqual(unreadableLines(text), [
    { line: 2, before: 'DATABASE URL' },
    { line: 3, before: '' },
    { line: 4 },
  ]);
  assert.deepEqual(Object.keys(dotenv.parse(text)), ['A', 'B'], 'what dotenv alone would have imported');
});

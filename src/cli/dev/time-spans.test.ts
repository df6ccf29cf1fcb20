import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CliError, EXIT } from './errors.ts';
import { durationFlag, instantFlag, spanMs } from './time-spans.ts';

const usage = (message: string) => (error: unknown) => {
  assert.ok(error instanceof CliError);
  assert.equal(error.message, message);
  assert.equal(error.exitCode, EXIT.usage);
  return true;
};

test('a span is a whole number of minutes, hours, days or weeks', () => {
  assert.equal(spanMs('30m'), 30 * 60_000);
  assert.equal(spanMs('2h'), 2 * 3_600_000);
  assert.equal(spanMs('7d'), 7 * 86_400_000);
  assert.equal(spanMs('1w'), 604_800_000);
  assert.equal(spanMs('0m'), 0);
  for (const other of [
    '',
    '1',
    'h',
    '1.5h',
    '-1h',
    '1H',
    '1 h',
    ' 1h',
    '1h ',
    '1s',
    '1y',
    '1hour',
    'yesterday',
  ]) {
    assert.equal(spanMs(other), undefined, JSON.stringify(other));
  }
});

test('a duration flag takes a span of at least a minute, else says what it takes', () => {
  assert.equal(durationFlag('--since', '1h'), 3_600_000);
  assert.equal(durationFlag('--since', '1m'), 60_000);
  for (const bad of ['0m', 'yesterday', '1s', '']) {
    assert.throws(
      () => durationFlag('--since', bad),
      usage(`--since takes a duration such as 1h, 1d or 1w (got "${bad}")`),
    );
  }
});

test('an instant flag takes ISO 8601 as given, or a span back from now', () => {
  const now = Date.parse('2026-11-28T12:00:00Z');
  assert.equal(instantFlag('--since', undefined, now), undefined);
  assert.equal(instantFlag('--since', '2h', now), '2026-11-28T10:00:00.000Z');
  assert.equal(instantFlag('--until', '1w', now), '2026-11-21T12:00:00.000Z');
  assert.equal(instantFlag('--since', '2026-11-27T00:00:00Z', now), '2026-11-27T00:00:00Z');
  for (const bad of ['yesterday', '1s', '']) {
    assert.throws(
      () => instantFlag('--until', bad, now),
      usage(
        `--until takes an ISO 8601 time (2026-11-28T09:00:00Z) or a span back from now (30m, 2h, 7d); got "${bad}"`,
      ),
    );
  }
});

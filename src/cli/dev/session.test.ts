import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CliError, EXIT } from './errors.ts';
import { clientFor } from './session.ts';

test('a token no header can carry (pasted JSON, a line break) is a usage error that never echoes it', () => {
  const pasted = '{\n  "token": "8f3c0a52-secret"\n}';
  assert.throws(
    () => clientFor({ url: 'http://127.0.0.1:1', token: pasted }),
    (error: unknown) =>
      error instanceof CliError &&
      error.exitCode === EXIT.usage &&
      !error.message.includes('8f3c0a52-secret'),
  );
  assert.ok(clientFor({ url: 'http://127.0.0.1:1', token: '8f3c0a52-secret' }));
});

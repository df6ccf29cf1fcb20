import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { TerminalError } from '../../jobs/errors.ts';
import { envScript } from './secrets.ts';

test('the secret script gives a shell every value exactly, whatever characters it holds', () => {
  const variables = {
    QUOTES: `it's "quoted" ''`,
    SHELL: '$HOME `id` $(id) \\n; exit 1 &',
    LINES: 'one\ntwo\n',
    EMPTY: '',
    UNICODE: 'grüße ✓',
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-env-'));
  const file = path.join(dir, 'berth-env');
  fs.writeFileSync(file, envScript(variables));
  try {
    // Sourced as the loader does; then the environment a child process gets, NUL-separated.
    const out = execFileSync('/bin/sh', ['-c', `. ${file} && exec env -0`], { env: {} }).toString();
    const seen = Object.fromEntries(
      out
        .split('\0')
        .filter((line) => line && !line.startsWith('PWD='))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    assert.deepEqual(seen, variables);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a name that is no environment variable name never reaches the script', () => {
  assert.throws(() => envScript({ 'A=B; rm -rf /': 'x' }), TerminalError);
});

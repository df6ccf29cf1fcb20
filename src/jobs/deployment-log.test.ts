import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { Db } from '../store/database.ts';
import { DeploymentLogWriter } from './deployment-log.ts';

test('values masked at different steps of a deployment all stay masked', () => {
  // Masking is pure: no line is written here, so no database is needed.
  const log = new DeploymentLogWriter(
    {} as Db,
    '00000000-0000-4000-8000-000000000000',
    pino({ enabled: false }),
  );
  log.maskValues(['variable-value-1']);
  log.maskValues(['git-credential-2']);
  log.maskValues(['dependency-password-3']);
  const text = log.masked('a variable-value-1, git-credential-2 and dependency-password-3 in one line');
  for (const value of ['variable-value-1', 'git-credential-2', 'dependency-password-3']) {
    assert.equal(text.includes(value), false, `${value} is masked: ${text}`);
  }
});

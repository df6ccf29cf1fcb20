import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from './config.ts';

/** A setting refused at start is named with what was given, minus a password in it. */
function refusal(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error.message;
  }
  assert.fail('the setting was taken');
}

test('a refused URL setting is quoted without the password it holds', () => {
  const smtp = refusal({ BERTH_SMTP_URL: 'http://mailer:hunter2-secret@mail.example.com:587' });
  assert.equal(
    smtp,
    'BERTH_SMTP_URL must start with smtp:// or smtps:// (for instance smtp://mail:25), got "http://mailer:***@mail.example.com:587"',
  );
  const acme = refusal({ BERTH_ACME_DIRECTORY_URL: 'https://eab:hunter2-secret@acme.example.com/directory' });
  assert.match(
    acme,
    /^BERTH_ACME_DIRECTORY_URL must be .*, got "https:\/\/eab:\*\*\*@acme\.example\.com\/directory"$/,
  );
  const endpoint = refusal({
    BERTH_BACKUP_S3_URL: 's3://backups',
    BERTH_BACKUP_S3_ENDPOINT: 'ftp://key:hunter2-secret@minio.internal',
  });
  assert.match(endpoint, /got "ftp:\/\/key:\*\*\*@minio\.internal"$/);
  for (const message of [smtp, acme, endpoint]) assert.doesNotMatch(message, /hunter2/);
});

test('BERTH_SMTP_URL without a host is refused at start, not at the first invitation', () => {
  assert.equal(
    refusal({ BERTH_SMTP_URL: 'smtps://mailer:hunter2-secret@:465' }),
    'BERTH_SMTP_URL must name the mail server (for instance smtps://user:password@mail.example.com:465), got "smtps://mailer:***@:465"',
  );
});

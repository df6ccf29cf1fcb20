import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from './config.ts';

test('BERTH_MAIL_FROM takes an address or a name with one, and refuses anything else at start', () => {
  assert.equal(loadConfig({}).mailFrom, 'Berth <berth@localhost>');
  assert.equal(loadConfig({ BERTH_MAIL_FROM: 'ops@example.com' }).mailFrom, 'ops@example.com');
  assert.equal(
    loadConfig({ BERTH_MAIL_FROM: 'Acme Ops <ops@example.com>' }).mailFrom,
    'Acme Ops <ops@example.com>',
  );
  for (const bad of ['Acme Ops', 'ops at example.com', '<ops@example.com', 'Acme <ops>']) {
    assert.throws(() => loadConfig({ BERTH_MAIL_FROM: bad }), {
      message: `BERTH_MAIL_FROM must be an email address, or a name and one in angle brackets (Berth <berth@example.com>), got "${bad}"`,
    });
  }
});

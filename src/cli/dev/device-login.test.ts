import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Poll, pollForToken } from './device-login.ts';
import { CliError } from './errors.ts';

/** Polls answering `answers` in turn; records how long the loop waited before each. */
function scripted(answers: Poll[]) {
  const waits: number[] = [];
  let polls = 0;
  return {
    waits,
    poll: async () => answers[polls++] as Poll,
    wait: async (ms: number) => {
      waits.push(ms);
    },
  };
}

const GRANTED: Poll = { granted: { access_token: 'x', role: 'developer', email: 'ada@example.com' } };

test('waits the interval before each poll, and 5 seconds more after every slow_down (RFC 8628 §3.5)', async () => {
  const s = scripted([
    { error: 'authorization_pending' },
    { error: 'slow_down' },
    { error: 'authorization_pending' },
    { error: 'slow_down' },
    GRANTED,
  ]);
  const granted = await pollForToken(s.poll, 5, s.wait);
  assert.equal(granted.email, 'ada@example.com');
  assert.deepEqual(s.waits, [5000, 5000, 10_000, 10_000, 15_000]);
});

test('stops with a clear error when denied, expired or refused otherwise', async () => {
  for (const [error, message] of [
    ['access_denied', /denied in the console/],
    ['expired_token', /expired before anyone approved it: run berth login again/],
    ['invalid_grant', /the server refused the login: the code was used/],
  ] as const) {
    const s = scripted([{ error: 'authorization_pending' }, { error, description: 'the code was used' }]);
    await assert.rejects(pollForToken(s.poll, 5, s.wait), (e: unknown) => {
      assert.ok(e instanceof CliError);
      assert.equal(e.exitCode, 3);
      assert.match(e.message, message);
      return true;
    });
  }
});

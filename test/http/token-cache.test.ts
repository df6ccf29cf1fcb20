import assert from 'node:assert/strict';
import { after, before, mock, test } from 'node:test';
import { REFRESH_MS, TokenAuthenticator, TTL_MS } from '../../src/api/plugins/auth.ts';
import { UnauthorizedError } from '../../src/domain/errors.ts';
import { type Harness, startHarness, type Tenant } from '../helpers/harness.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

test('a header seen within the TTL is answered from memory; a malformed one is never kept', async () => {
  const authenticator = new TokenAuthenticator(h.deps.store.db);
  const header = `Bearer ${t.token}`;
  const first = authenticator.authenticate(header);
  assert.ok(first instanceof Promise);
  assert.equal((await first).tokenId, t.tokenId);
  const again = authenticator.authenticate(header);
  assert.ok(!(again instanceof Promise));
  assert.equal(again.tokenId, t.tokenId);
  for (const bad of [undefined, 'Bearer nope', `Basic ${t.token}`]) {
    assert.throws(() => authenticator.authenticate(bad), UnauthorizedError);
    assert.throws(() => authenticator.authenticate(bad), UnauthorizedError);
  }
  await authenticator.settle();
});

test('a lookup that a revocation overtook answers its request but is not kept', async () => {
  const authenticator = new TokenAuthenticator(h.deps.store.db);
  const header = `Bearer ${t.token}`;
  const pending = authenticator.authenticate(header);
  // The access notification (or this process's revocation) clears the cache while the row is read.
  authenticator.forget();
  await pending;
  const next = authenticator.authenticate(header);
  assert.ok(next instanceof Promise);
  await next;
  await authenticator.settle();
});

/** The token lookups (accounts.ts findActiveToken) run since the harness's queries were last emptied. */
const lookups = () => h.queries.filter((q) => q.includes('"api_tokens"."token_hash" =')).length;

test('a token in steady use is looked up again before its TTL, once, and its requests never wait for it', async (ctx) => {
  mock.timers.enable({ apis: ['Date'], now: Date.now() });
  ctx.after(() => mock.timers.reset());
  const authenticator = new TokenAuthenticator(h.deps.store.db);
  const header = `Bearer ${t.token}`;
  await authenticator.authenticate(header);
  h.queries.length = 0;
  mock.timers.tick(REFRESH_MS + 1);
  // Fifty requests of a kept poll while the entry is due for a new lookup: all answered from memory.
  for (let i = 0; i < 50; i++) assert.equal(authenticator.cached(header)?.tokenId, t.tokenId);
  assert.ok(!(authenticator.authenticate(header) instanceof Promise));
  await authenticator.settle();
  assert.equal(lookups(), 1, 'one lookup in the background for them all');
  // Past the first lookup's TTL the refreshed entry still answers, with no lookup on the request's path.
  mock.timers.tick(TTL_MS - REFRESH_MS);
  assert.equal(authenticator.cached(header)?.tokenId, t.tokenId);
  await authenticator.settle();
  assert.equal(lookups(), 1);
});

test('requests that miss together share one lookup; after a revocation none joins the one under way', async () => {
  const authenticator = new TokenAuthenticator(h.deps.store.db);
  const header = `Bearer ${t.token}`;
  h.queries.length = 0;
  const together = Array.from({ length: 20 }, () => authenticator.authenticate(header));
  assert.ok(together.every((a) => a instanceof Promise));
  for (const auth of await Promise.all(together)) assert.equal(auth.tokenId, t.tokenId);
  assert.equal(lookups(), 1);
  h.queries.length = 0;
  authenticator.forget();
  const before = authenticator.authenticate(header);
  authenticator.forget();
  const after = authenticator.authenticate(header);
  await Promise.all([before, after]);
  assert.equal(lookups(), 2, 'the request after the second revocation looked the token up itself');
  await authenticator.settle();
});

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TokenAuthenticator } from '../../src/api/plugins/auth.ts';
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

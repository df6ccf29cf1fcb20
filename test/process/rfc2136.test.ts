import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { AcmeDnsUpdate } from '../../src/config.ts';
import { updateTxt } from '../../src/jobs/rfc2136.ts';
import { freePort } from '../helpers/docker.ts';
import { type KnotServer, knotAvailable, startKnot } from '../helpers/knot.ts';

/**
 * DNS-01's TXT records written by RFC 2136 UPDATE signed with TSIG, against a real server (Knot DNS):
 * added, deleted one value at a time, and refused with the server's reason for a wrong key.
 */
// CI installs knot and knot-dnsutils (.ci/run): there the test runs, or fails saying what is missing.
const skip =
  knotAvailable() || process.env.CI ? false : 'needs /usr/sbin/knotd and kdig (knot, knot-dnsutils)';

let knot: KnotServer;
let settings: AcmeDnsUpdate;
const NAME = '_acme-challenge.apps.acme.test';

before(async () => {
  if (skip) return;
  knot = await startKnot({
    port: await freePort(),
    zone: 'acme.test',
    records: [],
    updatable: ['_acme-challenge.apps'],
  });
  const [host, port] = knot.address.split(':') as [string, string];
  settings = {
    server: { host, port: Number(port) },
    zone: 'acme.test',
    tsig: { name: knot.key.name, algorithm: 'hmac-sha256', secret: Buffer.from(knot.key.secret, 'base64') },
  };
});
after(async () => {
  await knot?.close();
});

test('TXT records are added, and deleted one value at a time, by signed updates', { skip }, async () => {
  await updateTxt(settings, [
    { action: 'add', name: NAME, value: 'first-token' },
    { action: 'add', name: NAME, value: 'second-token' },
  ]);
  assert.deepEqual(knot.txt(NAME).sort(), ['first-token', 'second-token']);
  // Two orders' answers may share the name: taking one down leaves the other.
  await updateTxt(settings, [{ action: 'delete', name: NAME, value: 'first-token' }]);
  assert.deepEqual(knot.txt(NAME), ['second-token']);
  await updateTxt(settings, [{ action: 'delete', name: NAME, value: 'second-token' }]);
  assert.deepEqual(knot.txt(NAME), []);
});

test('a wrong secret, an unknown key or a name outside the zone is refused with the reason', {
  skip,
}, async () => {
  const add = [{ action: 'add' as const, name: NAME, value: 'x' }];
  await assert.rejects(
    updateTxt({ ...settings, tsig: { ...settings.tsig, secret: Buffer.alloc(32) } }, add),
    /refused the update of _acme-challenge\.apps\.acme\.test in acme\.test: BADSIG/,
  );
  await assert.rejects(
    updateTxt({ ...settings, tsig: { ...settings.tsig, name: 'someone-else' } }, add),
    /BADKEY \(the server knows no key of this name and algorithm/,
  );
  await assert.rejects(
    updateTxt({ ...settings, tsig: { ...settings.tsig, algorithm: 'hmac-sha512' } }, add),
    /BADKEY|BADSIG/,
  );
  await assert.rejects(
    updateTxt(settings, [{ action: 'add', name: '_acme-challenge.shop.acme.test', value: 'x' }]),
    /refused the update of _acme-challenge\.shop\.acme\.test in acme\.test: (REFUSED|BADKEY .*policy)/,
    "a name the server's policy does not give the key",
  );
  await assert.rejects(
    updateTxt(settings, [{ action: 'add', name: '_acme-challenge.example.org', value: 'x' }]),
    /_acme-challenge\.example\.org is not in the zone acme\.test \(BERTH_ACME_DNS_ZONE\)/,
  );
  assert.deepEqual(knot.txt(NAME), [], 'nothing was written');
});

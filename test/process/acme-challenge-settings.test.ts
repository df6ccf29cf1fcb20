import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freePort } from '../helpers/docker.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * BERTH_ACME_DNS_*: a bad value stops `berth serve` with one line naming the setting, the TSIG secret
 * never in it; so does a zone the ingress domain is not in (the docker provider's BERTH_INGRESS_HOST).
 */
const server = serverFixture('sim');

const SECRET = Buffer.alloc(32, 7).toString('base64');
const DNS = {
  BERTH_ACME_EMAIL: 'ops@example.com',
  BERTH_ACME_DNS_SERVER: '127.0.0.1:5353',
  BERTH_ACME_DNS_ZONE: 'example.com',
  BERTH_ACME_DNS_TSIG_KEY: 'berth-acme',
  BERTH_ACME_DNS_TSIG_SECRET: SECRET,
};

test('bad RFC 2136 settings stop the start with one line naming the setting', async () => {
  // The rest of the settings' checks are in src/config-acme.test.ts (loadConfig); here, the start itself.
  const cases: [Record<string, string>, RegExp][] = [
    [
      { ...DNS, BERTH_ACME_DNS_TSIG_SECRET: `${SECRET}!` },
      /^berth: BERTH_ACME_DNS_TSIG_SECRET must be the TSIG key's secret in base64/,
    ],
    [
      {
        ...DNS,
        BERTH_PROVIDER: 'docker',
        BERTH_INGRESS_HOST: 'apps.elsewhere.net',
        BERTH_INGRESS_PORT: String(await freePort()),
      },
      /^berth: BERTH_ACME_DNS_ZONE \(example\.com\) must contain BERTH_INGRESS_HOST \(apps\.elsewhere\.net\)/,
    ],
  ];
  for (const [env, message] of cases) {
    const proc = server.run(['serve'], { BERTH_PORT: '0', ...env });
    const code = await proc.exited;
    assert.equal(code, 2, `${JSON.stringify(env)}: ${proc.stderr()}`);
    assert.match(proc.stderr(), message);
    assert.equal(proc.stderr().trim().split('\n').length, 1, proc.stderr());
    assert.ok(!`${proc.stdout()}${proc.stderr()}`.includes(SECRET), 'the TSIG secret is never shown');
  }
});

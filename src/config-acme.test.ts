import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from './config.ts';

const SECRET = Buffer.alloc(32, 7).toString('base64');
const DNS = {
  BERTH_ACME_EMAIL: 'ops@example.com',
  BERTH_ACME_DNS_SERVER: '10.0.0.53',
  BERTH_ACME_DNS_ZONE: 'Example.COM.',
  BERTH_ACME_DNS_TSIG_KEY: 'berth-acme',
  BERTH_ACME_DNS_TSIG_SECRET: SECRET,
};

test('BERTH_ACME_CHALLENGE defaults to http-01 and takes tls-alpn-01', () => {
  assert.equal(loadConfig({ BERTH_ACME_EMAIL: 'ops@example.com' }).acme?.challenge, 'http-01');
  const alpn = loadConfig({ BERTH_ACME_EMAIL: 'ops@example.com', BERTH_ACME_CHALLENGE: 'tls-alpn-01' });
  assert.equal(alpn.acme?.challenge, 'tls-alpn-01');
  assert.equal(alpn.acme?.dns, undefined, 'no DNS-01 without BERTH_ACME_DNS_*');
});

test('BERTH_ACME_DNS_*: the RFC 2136 server, zone and TSIG key, with defaults', () => {
  assert.deepEqual(loadConfig(DNS).acme?.dns, {
    server: { host: '10.0.0.53', port: 53 },
    zone: 'example.com',
    tsig: { name: 'berth-acme', algorithm: 'hmac-sha256', secret: Buffer.alloc(32, 7) },
  });
  const v6 = loadConfig({
    ...DNS,
    BERTH_ACME_DNS_SERVER: '[fd00::53]:5353',
    BERTH_ACME_DNS_TSIG_ALGORITHM: 'HMAC-SHA512',
  });
  assert.deepEqual(v6.acme?.dns?.server, { host: 'fd00::53', port: 5353 });
  assert.equal(v6.acme?.dns?.tsig.algorithm, 'hmac-sha512');
});

test('bad challenge and RFC 2136 settings are refused naming the setting, never showing the secret', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [
      { BERTH_ACME_EMAIL: 'ops@example.com', BERTH_ACME_CHALLENGE: 'dns-01' },
      /^BERTH_ACME_CHALLENGE must be http-01 or tls-alpn-01, got "dns-01"$/,
    ],
    [{ BERTH_ACME_CHALLENGE: 'tls-alpn-01' }, /^BERTH_ACME_CHALLENGE is set but ACME is off/],
    [{ BERTH_ACME_DNS_SERVER: '10.0.0.53' }, /^BERTH_ACME_DNS_SERVER is set but ACME is off/],
    [{ ...DNS, BERTH_ACME_DNS_ZONE: '' }, /^BERTH_ACME_DNS_ZONE must be set too/],
    [{ ...DNS, BERTH_ACME_DNS_TSIG_KEY: '' }, /^BERTH_ACME_DNS_TSIG_KEY must be set too/],
    [{ ...DNS, BERTH_ACME_DNS_TSIG_SECRET: '' }, /^BERTH_ACME_DNS_TSIG_SECRET must be set too/],
    [{ ...DNS, BERTH_ACME_DNS_SERVER: 'ns1:99999' }, /^BERTH_ACME_DNS_SERVER must be host or host:port/],
    [{ ...DNS, BERTH_ACME_DNS_ZONE: 'not a zone' }, /^BERTH_ACME_DNS_ZONE must be a DNS zone name/],
    [{ ...DNS, BERTH_ACME_DNS_TSIG_KEY: 'a key' }, /^BERTH_ACME_DNS_TSIG_KEY must be the TSIG key's name/],
    [
      { ...DNS, BERTH_ACME_DNS_TSIG_ALGORITHM: 'hmac-md5' },
      /^BERTH_ACME_DNS_TSIG_ALGORITHM must be one of hmac-sha256, /,
    ],
    [
      { BERTH_ACME_EMAIL: 'ops@example.com', BERTH_ACME_DNS_TSIG_ALGORITHM: 'hmac-sha256' },
      /^BERTH_ACME_DNS_TSIG_ALGORITHM is set but BERTH_ACME_DNS_SERVER is not/,
    ],
    [
      { ...DNS, BERTH_ACME_DNS_TSIG_SECRET: `${SECRET}!` },
      /^BERTH_ACME_DNS_TSIG_SECRET must be the TSIG key's secret in base64/,
    ],
    [{ ...DNS, BERTH_ACME_DNS_TSIG_SECRET: 'c2hvcnQ=' }, /at least 16 bytes/],
  ];
  for (const [env, message] of cases) {
    assert.throws(
      () => loadConfig(env),
      (error: Error) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.match(error.message, message);
        assert.ok(!error.message.includes(SECRET.slice(0, 12)), 'the secret is never shown');
        return true;
      },
      JSON.stringify(env),
    );
  }
});

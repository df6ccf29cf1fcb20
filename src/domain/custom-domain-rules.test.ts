import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkDomainName, checkRecord, dnsRecordsFor, sameDnsName } from './custom-domain-rules.ts';

describe('checkDomainName', () => {
  test('accepts fully qualified names, lower-cased, with a trailing dot dropped', () => {
    assert.deepEqual(checkDomainName('App.Example.COM.'), { domain: 'app.example.com' });
    assert.deepEqual(checkDomainName('a-b.c1.io'), { domain: 'a-b.c1.io' });
    assert.deepEqual(checkDomainName(`${'a'.repeat(63)}.io`), { domain: `${'a'.repeat(63)}.io` });
  });

  test('253 characters is the longest name', () => {
    const label = 'a'.repeat(61);
    const name = `${label}.${label}.${label}.${label}.abcde`;
    assert.equal(name.length, 253);
    assert.deepEqual(checkDomainName(name), { domain: name });
    assert.ok('error' in checkDomainName(`${name}e`));
  });

  for (const [what, input, message] of [
    ['a number', 5, /must be a string/],
    ['empty', '', /required/],
    ['one label', 'example', /fully qualified/],
    ['an IPv4 address', '10.0.0.1', /not an IP address/],
    ['all digits', '1.2.3', /not an IP address/],
    ['an IPv6 address', '::1', /not an IP address/],
    ['a wildcard', '*.example.com', /wildcard/],
    ['a 64-character label', `${'b'.repeat(64)}.com`, /longer than 63/],
    ['a leading hyphen', '-a.com', /invalid label "-a"/],
    ['a trailing hyphen', 'a-.com', /invalid label "a-"/],
    ['an empty label', 'a..com', /invalid label ""/],
    ['an underscore', 'a_b.com', /invalid label "a_b"/],
  ] as const) {
    test(`refuses ${what}, on the field domain`, () => {
      const result = checkDomainName(input);
      assert.ok('error' in result, what);
      assert.equal(result.error.field, 'domain');
      assert.match(result.error.error, message);
    });
  }
});

describe('records', () => {
  const inputs = {
    domain: 'shop.example.com',
    verifyToken: 'aaa',
    validationToken: 'bbb',
    ingressHost: 'ingress.example.net',
    validationZone: 'validations.example',
  };

  test('AWS: a verify_acm CNAME and a CNAME to the ingress host', () => {
    assert.deepEqual(dnsRecordsFor({ ...inputs, cloud: 'aws' }), [
      {
        purpose: 'verify_acm',
        record_name: '_aaa.shop.example.com',
        record_type: 'CNAME',
        record_value: '_bbb.validations.example',
      },
      {
        purpose: 'route_app_traffic',
        record_name: 'shop.example.com',
        record_type: 'CNAME',
        record_value: 'ingress.example.net',
      },
    ]);
  });

  test('GCP: the traffic record is an A record', () => {
    const route = dnsRecordsFor({ ...inputs, cloud: 'gcp', ingressHost: '192.0.2.4' })[1];
    assert.deepEqual(route, {
      purpose: 'route_app_traffic',
      record_name: 'shop.example.com',
      record_type: 'A',
      record_value: '192.0.2.4',
    });
  });

  test('names compare case-insensitively and with or without the trailing dot', () => {
    assert.ok(sameDnsName('A.Example.com.', 'a.example.COM'));
    assert.ok(!sameDnsName('a.example.com', 'b.example.com'));
  });

  test('checkRecord names the record and says what was found', () => {
    const [acm] = dnsRecordsFor({ ...inputs, cloud: 'aws' });
    assert.ok(acm);
    assert.equal(checkRecord(acm, ['_BBB.validations.example.']), null);
    assert.equal(
      checkRecord(acm, ['other.example', '_bbb.validations.example']),
      null,
      'any matching answer is enough',
    );
    assert.deepEqual(checkRecord(acm, []), {
      field: '_aaa.shop.example.com',
      error: 'expected CNAME _aaa.shop.example.com -> _bbb.validations.example; found no record',
    });
    assert.match(checkRecord(acm, ['x.example'])?.error ?? '', /found x\.example$/);
  });
});

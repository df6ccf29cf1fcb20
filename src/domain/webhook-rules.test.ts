import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isPublicAddress } from './webhook-rules.ts';

test('every refused IPv4 range is refused in its IPv4-compatible, IPv4-mapped and IPv4-translated IPv6 forms', () => {
  const refused = [
    '127.0.0.1',
    '10.1.2.3',
    '169.254.169.254',
    '192.168.0.1',
    '172.16.0.1',
    '100.64.0.1',
    '0.0.0.0',
  ];
  for (const v4 of refused) {
    const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
    const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
    for (const form of [v4, `::${v4}`, `::${hex}`, `::ffff:${v4}`, `::ffff:${hex}`, `::ffff:0:${v4}`]) {
      assert.equal(isPublicAddress(form), false, form);
    }
  }
  for (const form of [
    '::7f00:1',
    '::a9fe:a9fe',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    '64:ff9b::7f00:1',
    '2002:7f00:1::',
  ]) {
    assert.equal(isPublicAddress(form), false, form);
  }
});

test('public addresses stay allowed, IPv4 in its mapped form too', () => {
  for (const form of ['8.8.8.8', '::ffff:8.8.8.8', '2606:4700:4700::1111']) {
    assert.equal(isPublicAddress(form), true, form);
  }
});

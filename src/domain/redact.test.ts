import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REDACTED, redactor } from './redact.ts';

test('every occurrence of a secret value is masked, the longest value first', () => {
  const mask = redactor(['hunter22', 'hunter22-and-more', 'a.b*c']);
  assert.equal(
    mask('pw=hunter22 full=hunter22-and-more re=a.b*c again hunter22'),
    `pw=${REDACTED} full=${REDACTED} re=${REDACTED} again ${REDACTED}`,
  );
});

test('values too short to hide anything are left alone; no values, no change', () => {
  assert.equal(redactor(['on', '1'])('on 1 one'), 'on 1 one');
  assert.equal(redactor([])('nothing to hide'), 'nothing to hide');
});

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { GENERATED_FILE, generatedTypes } from '../../tools/client-gen/generate.ts';

test('the committed client types are what the OpenAPI document generates today', async () => {
  const committed = fs.readFileSync(GENERATED_FILE, 'utf8');
  assert.ok(
    committed === (await generatedTypes()),
    'src/client/openapi.ts is stale: the API changed shape. Run `npm run generate:client` and commit it.',
  );
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { CreateServiceBody, PatchServiceBody, Service } from '../../src/api/schemas/services.ts';
import {
  EMPTY_SPEC,
  FIELD_SOURCES,
  SERVICE_FIELDS,
  SHOWN_FIELDS,
  SPEC_FIELDS,
  SPEC_VIEW_SCHEMAS,
} from '../../src/domain/service-fields.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';

/**
 * Adding a service field is one entry in domain/service-fields.ts plus a migration adding its column:
 * everything else that names the fields is derived from that declaration, which these tests check
 * field by field (a field added only to the declaration fails the column check until its migration
 * exists; one added anywhere else is not a spec field at all).
 */
let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema nodes
const props = (schema: any): Record<string, any> => schema.properties;
const declared = Object.entries(SERVICE_FIELDS) as [
  string,
  { schema: object; unset?: unknown; sources?: readonly string[]; shown?: string },
][];

describe('a service field is declared once', () => {
  test('the create and patch bodies take each declared field with its declared schema', () => {
    for (const [field, declaration] of declared) {
      const create = props(CreateServiceBody)[field];
      const patch = props(PatchServiceBody)[field];
      assert.ok(create && patch, field);
      for (const body of [create, patch]) {
        assert.deepEqual(
          JSON.parse(JSON.stringify(body)),
          JSON.parse(JSON.stringify(declaration.schema)),
          field,
        );
      }
    }
  });

  test('the Service response shows each field its declaration shows, and no field it hides', () => {
    const response = props(Service);
    for (const [field, declaration] of declared) {
      if (declaration.shown === 'hidden') {
        assert.equal(response[field], undefined, `${field} is hidden`);
        continue;
      }
      assert.equal(response[field], SPEC_VIEW_SCHEMAS[field as keyof typeof SPEC_VIEW_SCHEMAS], field);
      const required = (Service.required as string[]).includes(field);
      assert.equal(required, declaration.shown !== 'omitted', `${field}: required unless omitted when unset`);
    }
    assert.deepEqual(
      SHOWN_FIELDS,
      declared.filter(([, d]) => d.shown !== 'hidden').map(([f]) => f),
    );
  });

  test('unset values and source rules come from the declaration', () => {
    for (const [field, declaration] of declared) {
      assert.equal((EMPTY_SPEC as Record<string, unknown>)[field], declaration.unset, field);
      assert.equal((FIELD_SOURCES as Record<string, unknown>)[field], declaration.sources, field);
    }
    assert.deepEqual(SPEC_FIELDS, Object.keys(SERVICE_FIELDS));
  });

  test('the services table has a column for each declared field', async () => {
    const result = await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns WHERE table_name = 'services'`.execute(
      h.deps.store.db,
    );
    const columns = new Set(result.rows.map((r) => r.column_name));
    for (const field of SPEC_FIELDS)
      assert.ok(columns.has(field), `services.${field}: its migration is missing`);
  });

  test('a read shows every shown field: null where unset, or left out where the declaration omits it', async () => {
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: VALID_SERVICE.docker,
    });
    assert.equal(created.status, 200);
    const read = await h.request(
      'GET',
      `/v1/environments/${t.envId}/services/${created.body.data.service.id}`,
      {
        token: t.token,
      },
    );
    const service = read.body.data.service;
    for (const [field, declaration] of declared) {
      if (declaration.shown === 'hidden') assert.ok(!(field in service), field);
      else if (declaration.shown === 'omitted') assert.notEqual(service[field], null, field);
      else assert.ok(field in service, `${field} is shown`);
    }
    assert.equal(service.docker_image, VALID_SERVICE.docker.docker_image);
    assert.ok(!('git_repo_full_name' in service), 'an unset omitted field is left out');
  });
});

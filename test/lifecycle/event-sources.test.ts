/**
 * An event kind is declared once (store/events.ts EVENT_SOURCES: its table's columns) and shown through
 * one schema (api/schemas/events.ts): a column the schema does not show, or a schema field no column
 * fills, fails here. And what recording in the change's transaction means.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TObject } from 'typebox';
import { Value } from 'typebox/value';
import { Event } from '../../src/api/schemas/events.ts';
import { EVENT_KINDS } from '../../src/domain/events.ts';
import { eventView } from '../../src/domain/usecases/projections.ts';
import { EVENT_SOURCES, recordEvents } from '../../src/store/events.ts';
import { eventsAfter, latestEventSeq } from '../../src/store/repositories/events.ts';
import { updateService } from '../../src/store/repositories/services.ts';
import { startHarness, VALID_SERVICE } from '../helpers/harness.ts';

/** The API's name of a column in an event (environments are "private instances" there). */
const shownAs = (column: string) => (column === 'environment_id' ? 'private_instance_id' : column);

const ACCOUNT = '5b0c1a55-0000-4000-8000-000000000001';

/** A value the field's schema accepts. */
// biome-ignore lint/suspicious/noExplicitAny: walks any TypeBox schema
function sampleOf(schema: any): unknown {
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.anyOf) return sampleOf(schema.anyOf.find((s: { type?: string }) => s.type !== 'null'));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'boolean') return false;
  if (type === 'integer' || type === 'number') return 0;
  if (type === 'array') return [];
  if (type === 'object') return {};
  if (schema.format === 'uuid') return ACCOUNT;
  if (schema.format === 'date-time') return new Date().toISOString();
  return 'x';
}

for (const kind of EVENT_KINDS) {
  test(`${kind} events: every declared column is shown, every shown field comes from one`, () => {
    const member = (Event.anyOf as TObject[]).find((m) =>
      Value.Check(m.properties.type as never, `${kind}.created`),
    );
    assert.ok(member, `the Event schema has ${kind} events`);
    const state = member.properties.data as TObject;
    const columns = EVENT_SOURCES[kind].columns as readonly string[];
    for (const column of columns) {
      assert.ok(shownAs(column) in state.properties, `${kind}: column ${column} is in the schema`);
    }
    // A row of the declared columns, each with a value its schema field accepts.
    const data = Object.fromEntries(columns.map((c) => [c, sampleOf(state.properties[shownAs(c)])]));
    for (const action of ['created', 'updated', 'deleted']) {
      const shown = eventView({
        seq: '7',
        account_id: ACCOUNT,
        type: `${kind}.${action}`,
        data,
        at: new Date(),
      });
      assert.deepEqual(Object.keys(shown.data).sort(), Object.keys(state.properties).sort());
      assert.ok(Value.Check(Event, shown), `${kind}.${action} is an Event: ${JSON.stringify(shown)}`);
    }
  });
}

test('an event commits with its change, is dropped with its rollback, and a touch alone is none', async () => {
  const h = await startHarness();
  try {
    const t = await h.tenant();
    const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
      token: t.token,
      body: VALID_SERVICE.docker,
    });
    const serviceId: string = created.body.data.service.id;
    const db = h.deps.store.db;
    const latest = () => latestEventSeq(db, t.accountId);
    const before = await latest();
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await updateService(trx, serviceId, { name: 'renamed' });
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    assert.equal(await latest(), before, 'a rolled-back change has no event');
    await updateService(db, serviceId, {});
    assert.equal(await latest(), before, 'a change of updated_at alone has no event');
    await updateService(db, serviceId, { name: 'renamed' });
    const [event] = await eventsAfter(db, t.accountId, before, 10);
    assert.equal(event?.type, 'service.updated');
    assert.equal(event?.data.name, 'renamed');
    await assert.rejects(recordEvents(db, 'service', 'updated', [event?.data ?? {}]), /transaction/);
  } finally {
    await h.close();
  }
});

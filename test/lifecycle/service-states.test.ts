import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { jobHandlers } from '../../src/jobs/handlers/index.ts';
import { simTables } from '../../src/providers/sim/tables.ts';
import { enqueue } from '../../src/store/repositories/jobs.ts';
import { findServiceById, transitionService } from '../../src/store/repositories/services.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { claimHeldByTest } from '../helpers/jobs.ts';

let h: Harness;
let t: Tenant;
before(async () => {
  h = await startHarness();
  t = await h.tenant();
});
after(() => h.close());

async function createService(): Promise<string> {
  const res = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(res.status, 200);
  return res.body.data.service.id;
}

async function deleteJobOf(serviceId: string) {
  await enqueue(h.deps.store.db, {
    kind: 'delete_service',
    subjectId: serviceId,
    accountId: t.accountId,
    queueKey: serviceId,
  });
  return h.deps.store.db
    .selectFrom('jobs')
    .selectAll()
    .where('kind', '=', 'delete_service')
    .where('subject_id', '=', serviceId)
    .executeTakeFirstOrThrow();
}

const rowOf = async (id: string) => {
  const row = await findServiceById(h.deps.store.db, id);
  assert.ok(row);
  return row;
};

describe('service state writes are guarded by their from-states', () => {
  test('a transition from a state it does not name writes nothing', async () => {
    const id = await createService();
    const before = await rowOf(id);
    assert.equal(before.state, 'deploy_pending');
    const moved = await transitionService(h.deps.store.db, id, ['deleting'], 'deleted', { is_deleted: true });
    assert.equal(moved, false);
    assert.deepEqual(await rowOf(id), before, 'state, is_deleted and updated_at unchanged');
    assert.equal(await transitionService(h.deps.store.db, id, ['deploy_pending'], 'deploy_queued'), true);
    assert.equal((await rowOf(id)).state, 'deploy_queued');
  });

  test('a delete job for a service no delete reached removes nothing and moves nothing', async () => {
    const id = await createService();
    const before = await rowOf(id);
    const handler = jobHandlers(h.deps).delete_service;
    await handler.run(await deleteJobOf(id), new AbortController().signal, claimHeldByTest);
    assert.deepEqual(await rowOf(id), before);
    const removals = await simTables(h.deps.store.db)
      .selectFrom('sim_calls')
      .select('id')
      .where('operation', '=', 'delete_service')
      .where('subject_id', '=', id)
      .execute();
    assert.deepEqual(removals, [], 'the provider was not asked to remove it');
  });

  test('a delete job failing late does not turn a deleted service into delete_failed', async () => {
    const id = await createService();
    await sql`UPDATE services SET state = 'deleted', is_deleted = true WHERE id = ${id}`.execute(
      h.deps.store.db,
    );
    const handler = jobHandlers(h.deps).delete_service;
    await handler.fail(await deleteJobOf(id), 'late failure', claimHeldByTest);
    const row = await rowOf(id);
    assert.equal(row.state, 'deleted');
    assert.equal(row.is_deleted, true);
  });

  test('the delete job walks delete_pending -> delete_queued -> deleting -> deleted, and again is a no-op', async () => {
    const id = await createService();
    const res = await h.request('DELETE', `/v1/environments/${t.envId}/services/${id}`, { token: t.token });
    assert.ok(res.status < 300, `delete accepted: ${res.status}`);
    assert.equal((await rowOf(id)).state, 'delete_pending');
    const handler = jobHandlers(h.deps).delete_service;
    const job = await h.deps.store.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 'delete_service')
      .where('subject_id', '=', id)
      .executeTakeFirstOrThrow();
    await handler.run(job, new AbortController().signal, claimHeldByTest);
    const deleted = await rowOf(id);
    assert.equal(deleted.state, 'deleted');
    assert.equal(deleted.is_deleted, true);
    await handler.run(job, new AbortController().signal, claimHeldByTest);
    assert.deepEqual(await rowOf(id), deleted);
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobEnded, type Task } from './services.ts';

const task = (state: string): Task => ({
  ID: state,
  DesiredState: 'complete',
  Spec: {},
  Status: { State: state },
});

test('a job has ended only once it has tasks and every one has ended; its desired state says nothing', () => {
  assert.equal(jobEnded([]), false, 'just created: the orchestrator has not made its task yet');
  for (const state of ['new', 'pending', 'assigned', 'preparing', 'starting', 'running'])
    assert.equal(jobEnded([task(state)]), false, state);
  assert.equal(jobEnded([task('complete'), task('running')]), false);
  for (const state of ['complete', 'failed', 'rejected', 'shutdown', 'orphaned', 'remove'])
    assert.equal(jobEnded([task(state)]), true, state);
  assert.equal(jobEnded([task('failed'), task('complete')]), true);
});

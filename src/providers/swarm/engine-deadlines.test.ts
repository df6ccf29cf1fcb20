import assert from 'node:assert/strict';
import { test } from 'node:test';
import type Docker from 'dockerode';
import pino from 'pino';
import { CRON_JOB, hungInspects, unanswered, within } from '../../../test/helpers/unanswered.ts';
import { LABEL } from '../engine/labels.ts';
import { swarmCron } from './cron.ts';
import { requestTask } from './ops-cron.ts';
import type { SwarmDb } from './tables.ts';

const logger = pino({ level: 'silent' });

test('a swarm cron tick whose Engine call is never answered is abandoned, and the next ticks run', async () => {
  const hung = hungInspects();
  const template = {
    ID: 'template',
    Spec: {
      Labels: { [LABEL.service]: 'svc', [LABEL.deployment]: 'dep', [LABEL.cronSchedule]: '* * * * * *' },
    },
  };
  const docker = {
    listServices: async () => [template],
    getService: () => ({ inspect: hung.inspect }),
  } as unknown as Docker;
  // The routing table says the template's deployment serves.
  const db = {
    selectFrom: () => ({
      select: () => ({
        where: () => ({ where: () => ({ execute: async () => [{ deployment_id: 'dep' }] }) }),
      }),
    }),
  } as unknown as SwarmDb;
  await hung.aSecondTick(swarmCron(docker, db, logger, 100));
});

test("a swarm ops.json cron job's request fails, not waits for ever, when the Engine never answers", async () => {
  const docker = { listServices: unanswered } as unknown as Docker;
  await assert.rejects(
    within(5000, requestTask(docker, 'busybox', logger, 100)(CRON_JOB, new Date())),
    (err: Error) => {
      assert.doesNotMatch(err.message, /still waiting/);
      return true;
    },
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type Docker from 'dockerode';
import pino from 'pino';
import { CRON_JOB, hungInspects, unanswered, within } from '../../../test/helpers/unanswered.ts';
import { LABEL } from '../engine/labels.ts';
import type { DockerDb } from '../engine/tables.ts';
import { dockerCron } from './cron.ts';
import { containerTargets, requestReplica } from './replicas.ts';

function capturedLogger() {
  const lines: string[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) };
}

test("an ops.json cron job's request gives up on an Engine that never lists the replicas, and says so", async () => {
  const { lines, logger } = capturedLogger();
  const docker = { listContainers: unanswered } as unknown as Docker;
  await within(5000, requestReplica(docker, logger, 100)(CRON_JOB, new Date()));
  assert.ok(
    lines.some((line) => line.includes('the Docker Engine did not list its replicas')),
    lines.join('\n'),
  );
});

test("a cron service's tick whose Engine call is never answered is abandoned, and the next ticks run", async () => {
  const { logger } = capturedLogger();
  const hung = hungInspects();
  const template = {
    Id: 'template',
    Labels: { [LABEL.service]: 'svc', [LABEL.cronSchedule]: '* * * * * *' },
  };
  const docker = {
    listContainers: async () => [template],
    getContainer: () => ({ inspect: hung.inspect }),
  } as unknown as Docker;
  await hung.aSecondTick(dockerCron(docker, {} as DockerDb, logger, async () => new Set(['svc']), 100));
});

test("the ingress's replica lookup fails, not waits for ever, when the Engine never answers", async () => {
  const docker = { listContainers: unanswered } as unknown as Docker;
  const route = { serviceId: 'svc', deploymentId: 'dep', environmentId: 'env', port: 8080 };
  await assert.rejects(within(5000, containerTargets(docker, 100)(route)), (err: Error) => {
    assert.doesNotMatch(err.message, /still waiting/);
    return true;
  });
});

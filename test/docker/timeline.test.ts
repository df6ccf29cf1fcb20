import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import {
  BASE_IMAGE,
  buildImage,
  createWebService,
  deploySuccessfully,
  viaIngress,
} from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Every deployment keeps its timeline in its operations: each moment of its way to live, with a
 * millisecond timestamp, in the order it happened. The old version stops after the deployment succeeded.
 */
const server = serverFixture('docker');
const IMAGE = 'berth-test/timeline';

before(async () => {
  for (const version of ['v1', 'v2']) {
    await buildImage(
      `${IMAGE}:${version}`,
      `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo ${version} > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
    );
  }
});

interface Moment {
  mark: string;
  at: string;
  elapsed_ms: number;
}

const ROLLOUT = [
  'accepted',
  'claimed',
  'image_resolved',
  'container_created',
  'container_started',
  'first_healthy',
  'routed',
  'success',
];

function assertTimeline(timeline: Moment[], expected: string[]): void {
  assert.deepEqual(
    timeline.map((m) => m.mark),
    expected,
  );
  let previous = 0;
  for (const moment of timeline) {
    assert.match(
      moment.at,
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/,
      `${moment.mark} has a timestamp`,
    );
    const at = Date.parse(moment.at);
    assert.ok(at >= previous, `${moment.mark} comes after what precedes it`);
    previous = at;
    assert.equal(moment.elapsed_ms, at - Date.parse(timeline[0]?.at ?? ''));
  }
}

test("a deployment's operations show its timeline, in order, each moment with a millisecond timestamp; the ingress serves it from the moment it is routed", async () => {
  const { ingressPort } = server;
  const berth = await server.serve();
  try {
    const started = { ...(await server.firstStart(berth)), url: berth.url };
    const service = await createWebService(started, { name: 'Timeline', docker_image: IMAGE });
    const deploy = (tag: string) => deploySuccessfully(started, service.id, tag);
    const timelineOf = async (deploymentId: string): Promise<Moment[]> => {
      const res = await api(`${berth.url}/v1/deployments/${deploymentId}/operations`, started.token);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.timeline;
    };

    // The first version replaces nothing: no old version stops.
    const first = await deploy('v1');
    assertTimeline(await timelineOf(first), ROLLOUT);

    // Requests through the ingress all along the second rollout: v1 is what it caches when it starts.
    const served: { sentAt: number; body: string }[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const sentAt = Date.now();
        const res = await viaIngress(ingressPort, `${service.subdomain}.localhost`).catch(() => null);
        if (res) served.push({ sentAt, body: res.body });
      }
    })();
    const second = await deploy('v2');
    const timeline = await pollUntil(
      'the old version to stop',
      async () => {
        const moments = await timelineOf(second);
        return moments.some((m) => m.mark === 'old_stopped') ? moments : undefined;
      },
      { intervalMs: 250 },
    );
    polling = false;
    await poller;
    assertTimeline(timeline, [...ROLLOUT, 'old_stopped']);
    // The ingress forgets its routes when traffic moves: not one request sent after that gets v1.
    const routedAt = Date.parse(timeline.find((m) => m.mark === 'routed')?.at ?? '');
    assert.ok(
      served.some((s) => s.sentAt < routedAt && s.body === 'v1\n'),
      'v1 served before',
    );
    const after = served.filter((s) => s.sentAt > routedAt + 1);
    assert.ok(after.length > 0);
    assert.deepEqual(
      after.filter((s) => s.body !== 'v2\n'),
      [],
      'every request sent after the route moved reaches the new version',
    );
  } finally {
    await berth.kill('SIGTERM');
  }
});

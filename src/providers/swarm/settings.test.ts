import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../config.ts';
import { swarmSettings } from './settings.ts';

test('DOCKER_HOST names the manager: a unix socket or tcp://host:port; anything else is refused by name', () => {
  assert.deepEqual(swarmSettings({ DOCKER_HOST: 'unix:///run/swarm/1.sock' }).engine, {
    socketPath: '/run/swarm/1.sock',
  });
  assert.deepEqual(swarmSettings({ DOCKER_HOST: 'tcp://manager.internal:2375' }).engine, {
    host: 'manager.internal',
    port: 2375,
    protocol: 'http',
  });
  assert.throws(
    () => swarmSettings({ DOCKER_HOST: 'ssh://manager' }),
    (error: Error) => {
      assert.ok(error instanceof ConfigError);
      assert.match(
        error.message,
        /DOCKER_HOST must be unix:\/\/\/path or tcp:\/\/host:port, got "ssh:\/\/manager"/,
      );
      return true;
    },
  );
});

test('the rolling update monitor and overlay encryption are settings with defaults', () => {
  const defaults = swarmSettings({});
  assert.equal(defaults.monitorSeconds, 10);
  assert.equal(defaults.encryptNetworks, false);
  assert.equal(swarmSettings({ BERTH_SWARM_ENCRYPT_NETWORKS: 'true' }).encryptNetworks, true);
  assert.throws(
    () => swarmSettings({ BERTH_SWARM_ENCRYPT_NETWORKS: 'yes' }),
    /BERTH_SWARM_ENCRYPT_NETWORKS must be true or false/,
  );
  assert.throws(() => swarmSettings({ BERTH_SWARM_MONITOR_S: '0' }), ConfigError);
});

test('ops.json cron requests run from busybox unless BERTH_SWARM_REQUEST_IMAGE names another image', () => {
  assert.equal(swarmSettings({}).requestImage, 'busybox:stable');
  const image = 'registry.internal:5000/tools/wget:1';
  assert.equal(swarmSettings({ BERTH_SWARM_REQUEST_IMAGE: image }).requestImage, image);
});

test("BERTH_SWARM_NODE_ENGINES names each node's Engine (by hostname or ID); a malformed pair is refused by name", () => {
  assert.equal(swarmSettings({}).nodeEngines.size, 0);
  const engines = swarmSettings({
    BERTH_SWARM_NODE_ENGINES: 'node-1=tcp://10.0.0.1:2375, k3xq7=unix:///run/node2.sock',
  }).nodeEngines;
  assert.deepEqual(Object.fromEntries(engines), {
    'node-1': { host: '10.0.0.1', port: 2375, protocol: 'http' },
    k3xq7: { socketPath: '/run/node2.sock' },
  });
  assert.throws(
    () => swarmSettings({ BERTH_SWARM_NODE_ENGINES: 'tcp://10.0.0.1:2375' }),
    /BERTH_SWARM_NODE_ENGINES must be node=address pairs/,
  );
  assert.throws(
    () => swarmSettings({ BERTH_SWARM_NODE_ENGINES: 'node-1=ssh://10.0.0.1' }),
    /BERTH_SWARM_NODE_ENGINES \(node-1\) must be unix:\/\/\/path or tcp:\/\/host:port, got "ssh:\/\/10.0.0.1"/,
  );
});

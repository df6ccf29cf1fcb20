import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { openProvider } from '../../src/providers/registry.ts';
import { openStore } from '../../src/store/database.ts';
import { Servers } from '../helpers/server.ts';

/** A shutdown may stop serving more than once (a signal handler and close): each call ends, once. */
test('the docker provider stops serving however often it is asked, then closes', async () => {
  // The driver in this process, no `berth serve`: the shared set-up's database and ingress port.
  const servers = await Servers.open('docker', {});
  const { databaseUrl, dataDir } = servers.database;
  const store = await openStore({ databaseUrl, dataDir });
  try {
    const port = servers.ingressPort;
    const provider = await openProvider(
      { ...loadConfig({}), provider: 'docker', providerEnv: { BERTH_INGRESS_PORT: String(port) } },
      store.db,
      pino({ level: 'silent' }),
    );
    assert.ok(provider.serving, 'docker serves an ingress');
    await provider.serving.start();
    const stopped = Promise.all([provider.serving.stop(), provider.serving.stop()])
      .then(() => provider.serving?.stop())
      .then(() => provider.close())
      .then(() => 'stopped');
    const late = new Promise((resolve) => setTimeout(resolve, 20_000, 'still stopping after 20 s').unref());
    assert.equal(await Promise.race([stopped, late]), 'stopped');
    // The port is free again: a new ingress can take it.
    const again = await openProvider(
      { ...loadConfig({}), provider: 'docker', providerEnv: { BERTH_INGRESS_PORT: String(port) } },
      store.db,
      pino({ level: 'silent' }),
    );
    await again.serving?.start();
    await again.close();
  } finally {
    await store.close();
    await servers.close();
  }
});

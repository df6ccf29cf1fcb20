import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { freePort } from '../helpers/docker.ts';
import { type Pebble, pebbleAvailable, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { listening } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * The API itself over HTTPS with an ACME certificate (BERTH_TLS_ACME_NAME), from a real CA (pebble, with
 * 60-second certificates) that validates HTTP-01 through the docker ingress: a client trusting only the
 * CA's root reaches /health, chain and host name checked, and a renewed certificate serves new
 * connections without a restart.
 */
const NAME = 'api.berth.test';

const skip = pebbleAvailable() || process.env.CI ? false : 'needs /usr/bin/pebble and openssl';

const server = serverFixture('docker');
let dns: TestDnsServer;
let pebble: Pebble;

before(async () => {
  if (skip) return;
  dns = await startDnsServer();
});
after(async () => {
  await pebble?.close();
  await dns?.close();
});

function health(port: number, ca: string): Promise<{ status: number; fingerprint: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(
        { host: '127.0.0.1', port, path: '/health', servername: NAME, ca, agent: false, timeout: 10_000 },
        (res) => {
          const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, fingerprint }));
        },
      )
      .on('error', reject);
  });
}

test('the API is served over HTTPS with an ACME certificate for BERTH_TLS_ACME_NAME, renewed in place', {
  skip,
  timeout: 300_000,
}, async () => {
  pebble = await startPebble({ httpPort: server.ingressPort, dnsServer: dns.address, validitySeconds: 60 });
  dns.set(NAME, 'A', ['127.0.0.1']);
  const berth = server.run(['serve'], {
    BERTH_PORT: '0',
    BERTH_INGRESS_BIND: '127.0.0.1',
    BERTH_INGRESS_HTTPS_PORT: String(await freePort()),
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@berth.test',
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    BERTH_ACME_SCAN_MS: '1000',
    BERTH_TLS_ACME_NAME: NAME,
  });
  const { url } = await listening(berth, 'https');
  const port = Number(new URL(url).port);

  const first = await pollUntil(
    'the API to answer over HTTPS with its ACME certificate',
    async () => {
      const res = await health(port, pebble.rootPem).catch(() => null);
      return res?.status === 200 ? res : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  assert.deepEqual(pebble.orders, [NAME]);
  // A client that does not trust the CA refuses it: the chain is the CA's, not one of the system's.
  await assert.rejects(
    new Promise((resolve, reject) => {
      https
        .get({ host: '127.0.0.1', port, path: '/health', servername: NAME, agent: false }, resolve)
        .on('error', reject);
    }),
    /unable to (get|verify)|self[- ]signed/i,
  );

  // Two thirds into its 60 s, it is renewed; new connections get the new one, with no restart.
  const renewed = await pollUntil(
    'a renewed certificate',
    async () => {
      const res = await health(port, pebble.rootPem);
      assert.equal(res.status, 200);
      return res.fingerprint !== first.fingerprint ? res : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  assert.equal(renewed.status, 200);
  assert.deepEqual(pebble.orders, [NAME, NAME]);
});

test('BERTH_TLS_ACME_NAME beside certificate files, or without ACME, stops the start naming the setting', {
  skip,
}, async (t) => {
  const refusingDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-refusing-'));
  t.after(() => fs.rmSync(refusingDataDir, { recursive: true, force: true }));
  for (const [env, message] of [
    [
      {
        BERTH_TLS_ACME_NAME: NAME,
        BERTH_TLS_CERT_FILE: '/x.pem',
        BERTH_TLS_KEY_FILE: '/x.key',
        BERTH_ACME_EMAIL: 'a@b.test',
      },
      /BERTH_TLS_ACME_NAME and BERTH_TLS_CERT_FILE\/BERTH_TLS_KEY_FILE are two ways/,
    ],
    [{ BERTH_TLS_ACME_NAME: NAME }, /BERTH_TLS_ACME_NAME needs ACME on/],
    [
      { BERTH_TLS_ACME_NAME: '10.0.0.1', BERTH_ACME_EMAIL: 'a@b.test' },
      /BERTH_TLS_ACME_NAME must be the host name/,
    ],
    [
      { BERTH_TLS_ACME_NAME: NAME, BERTH_ACME_EMAIL: 'a@b.test', BERTH_PROVIDER: 'sim' },
      /BERTH_TLS_ACME_NAME needs the docker or swarm provider/,
    ],
  ] as const) {
    // Not the file's docker settings: no provider (sim) and no ingress port unless the case names them;
    // a data directory and an embedded database of its own, since the file's server holds the embedded
    // database's lock, and a Postgres database's secrets are sealed with its master key.
    const proc = server.run(['serve'], {
      BERTH_PORT: '0',
      BERTH_PROVIDER: '',
      BERTH_INGRESS_PORT: '',
      BERTH_DATABASE_URL: '',
      BERTH_DATA_DIR: refusingDataDir,
      ...env,
    });
    assert.equal(await proc.exited, 2, proc.stderr());
    assert.match(proc.stderr(), message);
    assert.equal(proc.stderr().trim().split('\n').length, 1, `one line: ${proc.stderr()}`);
  }
});

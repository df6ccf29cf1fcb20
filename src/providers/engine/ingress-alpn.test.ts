import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import pino from 'pino';
import { selfSignedCertificate } from '../../../test/helpers/self-signed.ts';
import { openStore, type Store } from '../../store/database.ts';
import { migrateDriver } from '../migrations.ts';
import type { ServedCertificate } from '../provider.ts';
import { type Ingress, startIngress } from './ingress.ts';
import { dockerMigrations, dockerTables } from './tables.ts';
import { Traffic } from './traffic.ts';

/**
 * TLS-ALPN-01 at the ingress: a handshake offering `acme-tls/1` (the CA's) gets the challenge's
 * certificate for the name, every other handshake the name's own, even while a challenge is pending.
 */
const NAME = 'www.shop.test';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-ingress-alpn-'));
let store: Store;
let ingress: Ingress;

function selfSigned(label: string): ServedCertificate {
  const { cert, key } = selfSignedCertificate(dir, {
    label,
    commonName: label,
    subjectAltName: `DNS:${NAME}`,
  });
  return { cert, key };
}

const own = selfSigned('own');
const challenge = selfSigned('challenge');
const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

before(async () => {
  store = await openStore({ dataDir: path.join(dir, 'data'), databaseUrl: undefined });
  await migrateDriver(store.db, 'docker', dockerMigrations);
  const db = dockerTables(store.db);
  ingress = await startIngress({
    db,
    targets: async () => [],
    logger: pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ingressHost: 'apps.test',
    traffic: new Traffic(db),
    tls: {
      certificates: {
        httpChallenge: async () => null,
        alpnChallenge: async (name) => (name === NAME ? challenge : null),
        certificate: async (name) => (name === NAME ? own : null),
      },
      port: 0,
    },
  });
});
after(async () => {
  await ingress?.close();
  await store?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A handshake for `servername` offering `protocols`: the certificate presented and the protocol chosen. */
function handshake(servername: string, protocols?: string[]) {
  const port = Number(new URL(ingress.httpsUrl as string).port);
  return new Promise<{ fingerprint: string; protocol: string | false | null; closedByServer: Promise<void> }>(
    (resolve, reject) => {
      const socket = tls.connect(
        {
          host: '127.0.0.1',
          port,
          servername,
          rejectUnauthorized: false,
          ...(protocols && { ALPNProtocols: protocols }),
        },
        () => {
          const closedByServer = new Promise<void>((done) => socket.on('end', done));
          socket.resume();
          resolve({
            fingerprint: socket.getPeerX509Certificate()?.fingerprint256 ?? '',
            protocol: socket.alpnProtocol,
            closedByServer,
          });
        },
      );
      socket.on('error', reject);
    },
  );
}

test("the CA's acme-tls/1 handshake gets the challenge certificate, and the server ends it", async () => {
  const answer = await handshake(NAME, ['acme-tls/1']);
  assert.equal(answer.fingerprint, fingerprint(challenge.cert));
  assert.equal(answer.protocol, 'acme-tls/1');
  await answer.closedByServer;
});

test("every other handshake gets the name's own certificate while the challenge is pending", async () => {
  for (const protocols of [undefined, ['http/1.1'], ['h2', 'http/1.1']]) {
    const answer = await handshake(NAME, protocols);
    assert.equal(answer.fingerprint, fingerprint(own.cert), JSON.stringify(protocols));
    assert.equal(answer.protocol, protocols ? 'http/1.1' : false);
  }
});

test('acme-tls/1 for a name with no pending challenge gets no certificate', async () => {
  await assert.rejects(handshake('other.shop.test', ['acme-tls/1']));
});

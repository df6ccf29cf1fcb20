import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { insertRoute } from '../../../test/helpers/ingress-routes.ts';
import { selfSignedCertificate } from '../../../test/helpers/self-signed.ts';
import { DEFAULT_OPS_CONFIG, type IngressSettings } from '../../domain/ops-json.ts';
import { openStore, type Store } from '../../store/database.ts';
import { migrateDriver } from '../migrations.ts';
import type { ServedCertificate } from '../provider.ts';
import { type Ingress, startIngress } from './ingress.ts';
import { type DockerDb, dockerMigrations, dockerTables } from './tables.ts';
import { Traffic } from './traffic.ts';

/**
 * The ops.json ingress settings of a name that has a certificate: plain HTTP redirects to HTTPS unless
 * the service opts out (https_redirect: false), and HTTPS answers carry HSTS only when it opts in
 * (hsts_max_age). Every name under the ingress domain has a (self-signed) certificate here.
 */
const INGRESS_HOST = 'apps.test';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-ingress-https-'));
let store: Store;
let ingress: Ingress;
let backend: http.Server;

function selfSigned(): ServedCertificate {
  const name = `*.${INGRESS_HOST}`;
  const { cert, key } = selfSignedCertificate(dir, {
    label: 'cert',
    commonName: name,
    subjectAltName: `DNS:${name}`,
  });
  return { cert, key };
}

/** A routed web service at `{subdomain}.apps.test` whose stored ops.json has these ingress settings. */
async function route(db: DockerDb, subdomain: string, ingress: Partial<IngressSettings>) {
  await insertRoute(db, subdomain, { ingress });
}

before(async () => {
  backend = http.createServer((_req, res) => res.end('hello\n'));
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const backendPort = (backend.address() as { port: number }).port;
  store = await openStore({ dataDir: path.join(dir, 'data'), databaseUrl: undefined });
  await migrateDriver(store.db, 'docker', dockerMigrations);
  const db = dockerTables(store.db);
  const defaults = DEFAULT_OPS_CONFIG.ingress;
  await route(db, 'default', defaults);
  await route(db, 'plain', { ...defaults, https_redirect: false } satisfies IngressSettings);
  await route(db, 'strict', { ...defaults, hsts_max_age: 31_536_000 } satisfies IngressSettings);
  // A route written before these settings existed: its stored ops.json lacks both.
  const { https_redirect: _redirect, hsts_max_age: _hsts, ...older } = defaults;
  await route(db, 'older', older);
  const own = selfSigned();
  ingress = await startIngress({
    db,
    targets: async () => [`127.0.0.1:${backendPort}`],
    logger: pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ingressHost: INGRESS_HOST,
    traffic: new Traffic(db),
    tls: {
      certificates: {
        httpChallenge: async () => null,
        alpnChallenge: async () => null,
        certificate: async (name) => (name.endsWith(`.${INGRESS_HOST}`) ? own : null),
      },
      port: 0,
    },
  });
});
after(async () => {
  await ingress?.close();
  await store?.close();
  await new Promise((resolve) => backend?.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function get(url: string, host: string): Promise<Answer> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    client
      .get(
        {
          host: target.hostname,
          port: target.port,
          path: '/a?b=1',
          headers: { host },
          servername: host,
          rejectUnauthorized: false,
          agent: false,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            body += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        },
      )
      .on('error', reject);
  });
}

const host = (subdomain: string) => `${subdomain}.${INGRESS_HOST}`;

test('plain HTTP to a name with a certificate redirects to HTTPS by default', async () => {
  for (const name of ['default', 'strict', 'older']) {
    const answer = await get(ingress.url, host(name));
    assert.equal(answer.status, 308, name);
    // The test's HTTPS port is chosen by the system (0), which the redirect cannot name.
    assert.equal(answer.headers.location, `https://${host(name)}:0/a?b=1`, name);
  }
});

test('a service that opts out of the redirect is served over plain HTTP, without HSTS', async () => {
  const answer = await get(ingress.url, host('plain'));
  assert.equal(answer.status, 200);
  assert.equal(answer.body, 'hello\n');
  assert.equal(answer.headers['strict-transport-security'], undefined);
});

test('HTTPS answers carry HSTS only for a service that opted in', async () => {
  const strict = await get(ingress.httpsUrl as string, host('strict'));
  assert.equal(strict.status, 200);
  assert.equal(strict.body, 'hello\n');
  assert.equal(strict.headers['strict-transport-security'], 'max-age=31536000');
  for (const name of ['default', 'plain', 'older']) {
    const answer = await get(ingress.httpsUrl as string, host(name));
    assert.equal(answer.status, 200, name);
    assert.equal(answer.headers['strict-transport-security'], undefined, name);
  }
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type tls from 'node:tls';
import { connect as tlsConnect } from 'node:tls';
import pino from 'pino';
import { insertRoute } from '../../../test/helpers/ingress-routes.ts';
import { pollUntil } from '../../../test/helpers/poll.ts';
import { selfSignedCertificate } from '../../../test/helpers/self-signed.ts';
import { h2Get } from '../../../test/helpers/tls-get.ts';
import { DEFAULT_OPS_CONFIG, type OpsConfig } from '../../domain/ops-json.ts';
import { openStore, type Store } from '../../store/database.ts';
import { migrateDriver } from '../migrations.ts';
import type { ServedCertificate } from '../provider.ts';
import { type Ingress, startIngress } from './ingress.ts';
import { type DockerDb, dockerMigrations, dockerTables } from './tables.ts';
import { Traffic } from './traffic.ts';

/**
 * The ingress with BERTH_INGRESS_PROXY=haproxy: a real HAProxy serves HTTPS from the routing table and
 * the certificates Berth gives it, follows route and certificate changes, and applies ops.json.
 */
const INGRESS_HOST = 'apps.test';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-ingress-haproxy-'));
let store: Store;
let db: DockerDb;
let ingress: Ingress;
const backends: http.Server[] = [];
/** Where each service's replicas answer, as the engine would say; the test moves them. */
const replicas = new Map<string, string[]>();
let served: ServedCertificate;
let rounds = 0;

function certificate(): ServedCertificate {
  rounds += 1;
  const name = `*.${INGRESS_HOST}`;
  return selfSignedCertificate(dir, {
    label: `cert-${rounds}`,
    commonName: name,
    subjectAltName: `DNS:${name}`,
  });
}

/** A backend answering `name` and echoing the forwarded headers it got. */
async function backend(name: string): Promise<string> {
  const server = http.createServer((req, res) => {
    res.setHeader(
      'x-forwarded-seen',
      `${req.headers['x-forwarded-for']} ${req.headers['x-forwarded-proto']}`,
    );
    res.end(`${name}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  backends.push(server);
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

async function route(subdomain: string, ops: Partial<OpsConfig>, targets: string[]): Promise<string> {
  const serviceId = await insertRoute(db, subdomain, ops);
  replicas.set(serviceId, targets);
  return serviceId;
}

/** The answers the ingress counted for each service's metrics, by status. */
const counted = new Map<string, Map<number, number>>();
class CountingTraffic extends Traffic {
  override record(serviceId: string, status: number, ms: number): void {
    const byStatus = counted.get(serviceId) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    counted.set(serviceId, byStatus);
    super.record(serviceId, status, ms);
  }
}

let moving: string;
let walled: string;
let first: string;
let second: string;

before(async () => {
  store = await openStore({ dataDir: path.join(dir, 'data'), databaseUrl: undefined });
  await migrateDriver(store.db, 'docker', dockerMigrations);
  db = dockerTables(store.db);
  first = await backend('first');
  second = await backend('second');
  served = certificate();
  const ingressDefaults = DEFAULT_OPS_CONFIG.ingress;
  moving = await route('web', {}, [first]);
  await route('strict', { ingress: { ...ingressDefaults, hsts_max_age: 600 } }, [first]);
  walled = await route('walled', { ip_whitelist: ['10.9.9.9'] }, [first]);
  await route('small', { ingress: { ...ingressDefaults, request_body_size: 1 } }, [first]);
  await route('idle', {}, []);
  ingress = await startIngress({
    db,
    targets: async (r) => replicas.get(r.serviceId) ?? [],
    logger: pino({ level: process.env.TEST_LOG ?? 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ingressHost: INGRESS_HOST,
    traffic: new CountingTraffic(db),
    tls: {
      certificates: {
        httpChallenge: async () => null,
        alpnChallenge: async () => null,
        certificate: async (name) => (name.endsWith(`.${INGRESS_HOST}`) ? served : null),
      },
      port: 0,
      proxy: 'haproxy',
    },
  });
});
after(async () => {
  await ingress?.close();
  await store?.close();
  for (const server of backends) await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  peer: tls.PeerCertificate | null;
}

/** A request that trusts only the served certificate and checks the name, as a browser would. */
function get(
  url: string,
  host: string,
  extra: http.OutgoingHttpHeaders = {},
  ca = served.cert,
): Promise<Answer> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        method: extra['content-length'] ? 'POST' : 'GET',
        host: target.hostname,
        port: target.port,
        path: '/a?b=1',
        headers: { host, ...extra },
        servername: host,
        ca,
        agent: false,
      },
      (res) => {
        const socket = res.socket as tls.TLSSocket;
        const peer = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate() : null;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, peer }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** As long as HAProxy may take to pick up a change under a loaded CI machine. */
const until = <T>(what: string, check: () => Promise<T | undefined>) =>
  pollUntil(what, check, { timeoutMs: 20_000, intervalMs: 50 });

const host = (subdomain: string) => `${subdomain}.${INGRESS_HOST}`;

test('HAProxy serves HTTPS with the certificate by SNI, chain and name verified, forwarding the client', async () => {
  const answer = await get(ingress.httpsUrl as string, host('web'));
  assert.equal(answer.status, 200);
  assert.equal(answer.body, 'first\n');
  assert.equal(answer.headers['x-forwarded-seen'], '127.0.0.1 https');
  assert.equal(answer.headers['strict-transport-security'], undefined);
  // Forged forwarded headers are replaced, not appended to.
  const forged = await get(ingress.httpsUrl as string, host('web'), {
    'x-forwarded-for': '6.6.6.6',
    'x-forwarded-proto': 'http',
  });
  assert.equal(forged.headers['x-forwarded-seen'], '127.0.0.1 https');
  // A certificate the client does not trust fails the handshake (the chain is checked).
  await assert.rejects(get(ingress.httpsUrl as string, host('web'), {}, certificate().cert));
  // A name without a certificate fails its handshake; one with no service is a 404.
  await assert.rejects(get(ingress.httpsUrl as string, 'elsewhere.test', {}));
  const missing = await get(ingress.httpsUrl as string, host('nothing'));
  assert.equal(missing.status, 404);
  assert.equal(missing.body, `no service at ${host('nothing')}\n`);
});

test("HAProxy applies each service's ops.json: HSTS, allow-list, body limit, no replicas", async () => {
  const strict = await get(ingress.httpsUrl as string, host('strict'));
  assert.equal(strict.headers['strict-transport-security'], 'max-age=600');
  const walled = await get(ingress.httpsUrl as string, host('walled'));
  assert.equal(walled.status, 403);
  assert.equal(walled.body, 'your address may not reach this service\n');
  const large = await get(ingress.httpsUrl as string, host('small'), {
    'content-length': String(2 * 1024 * 1024),
  });
  assert.equal(large.status, 413);
  assert.equal(large.body, 'request bodies are limited to 1 MB\n');
  const idle = await get(ingress.httpsUrl as string, host('idle'));
  assert.equal(idle.status, 503);
});

/** One GET over HTTP/2 (ALPN h2), trusting only the served certificate. */
const getH2 = (url: string, name: string) => h2Get({ url, name, ca: served.cert });

test('HAProxy speaks HTTP/2 to clients that offer it, with the same answers', async () => {
  const answer = await getH2(ingress.httpsUrl as string, host('strict'));
  assert.equal(answer.status, 200);
  assert.equal(answer.body, 'first\n');
  assert.equal(answer.headers['x-forwarded-seen'], '127.0.0.1 https');
  assert.equal(answer.headers['strict-transport-security'], 'max-age=600');
  assert.equal((await getH2(ingress.httpsUrl as string, host('walled'))).status, 403);
});

/** A handshake offering only `acme-tls/1`, as a CA's TLS-ALPN-01 validation does: the certificate it gets. */
function alpnHandshake(url: string, name: string, ca: string): Promise<tls.PeerCertificate> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect(
      {
        host: target.hostname,
        port: Number(target.port),
        servername: name,
        ALPNProtocols: ['acme-tls/1'],
        ca,
      },
      () => {
        resolve(socket.getPeerCertificate());
        socket.destroy();
      },
    );
    socket.on('error', reject);
  });
}

test('with TLS-ALPN-01 on, HAProxy passes acme-tls/1 handshakes to Berth and serves the rest as before', async () => {
  const challenge = selfSignedCertificate(dir, {
    label: 'alpn-challenge',
    commonName: host('web'),
    subjectAltName: `DNS:${host('web')}`,
  });
  const alpn = await startIngress({
    db,
    targets: async (r) => replicas.get(r.serviceId) ?? [],
    logger: pino({ level: process.env.TEST_LOG ?? 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ingressHost: INGRESS_HOST,
    traffic: new Traffic(db),
    tls: {
      certificates: {
        httpChallenge: async () => null,
        alpnChallenge: async (name) => (name === host('web') ? challenge : null),
        certificate: async (name) => (name.endsWith(`.${INGRESS_HOST}`) ? served : null),
      },
      port: 0,
      proxy: 'haproxy',
      alpnChallenges: true,
    },
  });
  try {
    const url = alpn.httpsUrl as string;
    const presented = await alpnHandshake(url, host('web'), challenge.cert);
    assert.equal(presented.fingerprint256, new X509Certificate(challenge.cert).fingerprint256);
    // A name with no pending challenge fails its validation handshake.
    await assert.rejects(alpnHandshake(url, host('strict'), challenge.cert));
    // Everyone else: the name's own certificate, the client's address kept through the inner hop.
    const answer = await get(url, host('strict'));
    assert.equal(answer.status, 200);
    assert.equal(answer.peer?.fingerprint256, new X509Certificate(served.cert).fingerprint256);
    assert.equal(answer.headers['x-forwarded-seen'], '127.0.0.1 https');
    assert.equal(answer.headers['strict-transport-security'], 'max-age=600');
    assert.equal((await get(url, host('walled'))).status, 403);
    assert.equal((await getH2(url, host('strict'))).body, 'first\n');
  } finally {
    await alpn.close();
  }
});

test('plain HTTP still redirects to HTTPS (the Node ingress keeps port 80 and the ACME challenges)', async () => {
  const answer = await get(ingress.url, host('web'));
  assert.equal(answer.status, 308);
});

test('a new deployment moves traffic at run time, with no failed request in a keep-alive loop', async () => {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 4 });
  let failures = 0;
  let requests = 0;
  let looping = true;
  const loop = (async () => {
    while (looping) {
      await new Promise<void>((resolve) => {
        https
          .get(
            {
              host: '127.0.0.1',
              port: new URL(ingress.httpsUrl as string).port,
              path: '/',
              headers: { host: host('web') },
              servername: host('web'),
              ca: served.cert,
              agent,
            },
            (res) => {
              if (res.statusCode !== 200) failures++;
              res.resume();
              res.on('end', resolve);
            },
          )
          .on('error', () => {
            failures++;
            resolve();
          });
      });
      requests++;
    }
  })();
  const idle = new https.Agent({ keepAlive: true, maxSockets: 1 });
  assert.equal((await getKept(idle, served.cert)).status, 200);
  replicas.set(moving, [second]);
  await db
    .updateTable('docker_routes')
    .set({ deployment_id: randomUUID() })
    .where('service_id', '=', moving)
    .execute();
  ingress.forget();
  await until('the new deployment to answer', async () =>
    (await get(ingress.httpsUrl as string, host('web'))).body === 'second\n' ? true : undefined,
  );
  // The loop's kept connections carry on after the switch too.
  const switched = requests;
  await until('requests after the switch', async () => (requests > switched + 50 ? true : undefined));
  looping = false;
  await loop;
  agent.destroy();
  assert.equal(failures, 0, `${failures} of ${requests} requests failed across the switch`);
  // Switched at run time: a reload would have closed the idle kept connection.
  assert.deepEqual(await getKept(idle, served.cert), { status: 200, reused: true });
  idle.destroy();
});

test('a replica that moves within the same deployment (restarted in place) is followed', async () => {
  replicas.set(moving, [first]);
  await until('the moved replica to answer', async () =>
    (await get(ingress.httpsUrl as string, host('web'))).body === 'first\n' ? true : undefined,
  );
});

/** A GET on `agent`'s kept connection: its status, and whether that connection was one kept from before. */
function getKept(agent: https.Agent, ca: string): Promise<{ status: number; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      {
        host: '127.0.0.1',
        port: new URL(ingress.httpsUrl as string).port,
        path: '/',
        headers: { host: host('web') },
        servername: host('web'),
        ca,
        agent,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
      },
    );
    req.on('error', reject);
  });
}

test('a renewed certificate is served at run time: no reload, kept connections stay open', async () => {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const kept = served.cert;
  assert.equal((await getKept(agent, kept)).status, 200);
  const before = await get(ingress.httpsUrl as string, host('web'));
  served = certificate();
  const renewed = await until('the renewed certificate', async () => {
    const answer = await get(ingress.httpsUrl as string, host('web'));
    return answer.peer?.fingerprint256 !== before.peer?.fingerprint256 ? answer : undefined;
  });
  assert.equal(renewed.status, 200);
  // A reload would have closed the idle kept connection; it still answers, on the old certificate.
  assert.deepEqual(await getKept(agent, kept), { status: 200, reused: true });
  agent.destroy();
});

test("each service's answers over HAProxy are counted for its metrics, by status class", async () => {
  const before = counted.get(moving)?.get(200) ?? 0;
  for (let i = 0; i < 5; i++) await get(ingress.httpsUrl as string, host('web'));
  await get(ingress.httpsUrl as string, host('walled'));
  await until('the answers counted', async () =>
    (counted.get(moving)?.get(200) ?? 0) >= before + 5 && counted.get(walled)?.get(400) ? true : undefined,
  );
});

test('HAProxy stops, and its keys leave the disk, with the Berth process that runs it, even one killed with SIGKILL', async () => {
  const planes = () =>
    new Set(fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith('berth-haproxy-')));
  const running = planes();
  const haproxyModule = new URL('./haproxy.ts', import.meta.url).pathname;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { startHaproxy } from ${JSON.stringify(haproxyModule)};
       import pino from 'pino';
       const plane = await startHaproxy({ bind: '127.0.0.1', port: 0, intervalMs: 1000, counted: () => {},
         load: async () => ({ routes: [], certificates: new Map() }), logger: pino({ level: 'silent' }) });
       console.log(plane.url);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (chunk) => {
    out += chunk;
  });
  const port = await until('HAProxy to listen', async () => /:(\d+)\n/.exec(out)?.[1]);
  const accepts = () =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
  assert.equal(await accepts(), true);
  child.kill('SIGKILL');
  await until('the port to be free again', async () => ((await accepts()) ? undefined : true));
  await until('its directory to be gone', async () =>
    [...planes()].every((name) => running.has(name)) ? true : undefined,
  );
});

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { insertRoute } from '../../../test/helpers/ingress-routes.ts';
import { DEFAULT_OPS_CONFIG } from '../../domain/ops-json.ts';
import { openStore, type Store } from '../../store/database.ts';
import { migrateDriver } from '../migrations.ts';
import { type Ingress, startIngress } from './ingress.ts';
import { dockerMigrations, dockerTables } from './tables.ts';
import { Traffic } from './traffic.ts';

/**
 * What the ingress's proxy (proxy.ts) passes on to a replica and back: the request as the client sent
 * it less connection-only headers, X-Forwarded-*, the body streamed and cut at request_body_size, and
 * plain answers when the replica cannot be reached or a path climbs out.
 */
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-proxy-'));
let store: Store;
let ingress: Ingress;
let backend: http.Server;
let unreachable: string;
const echoService = randomUUID();

before(async () => {
  // Echoes what it was sent, with connection-only headers of its own that must not reach the client.
  backend = http.createServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'keep-alive': 'timeout=99',
        'x-from': 'replica',
      });
      res.end(JSON.stringify({ method: req.method, url: req.url, bytes, headers: req.headers }));
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const backendAddress = `127.0.0.1:${(backend.address() as { port: number }).port}`;
  // A port nothing listens on: taken, then given back.
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  unreachable = `127.0.0.1:${(probe.address() as { port: number }).port}`;
  await new Promise((resolve) => probe.close(resolve));

  store = await openStore({ dataDir: path.join(dir, 'data'), databaseUrl: undefined });
  await migrateDriver(store.db, 'docker', dockerMigrations);
  const db = dockerTables(store.db);
  for (const [subdomain, serviceId] of [
    ['echo', echoService],
    ['gone', randomUUID()],
  ]) {
    await insertRoute(
      db,
      subdomain as string,
      { ingress: { ...DEFAULT_OPS_CONFIG.ingress, request_body_size: 1 } },
      serviceId as string,
    );
  }
  ingress = await startIngress({
    db,
    targets: async (route) => [route.serviceId === echoService ? backendAddress : unreachable],
    logger: pino({ level: 'silent' }),
    host: '127.0.0.1',
    port: 0,
    ingressHost: 'apps.test',
    traffic: new Traffic(db),
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

/** One request to the ingress, raw enough to send any path and a chunked body. */
function send(
  host: string,
  options: { method?: string; path?: string; headers?: Record<string, string>; chunks?: Buffer[] } = {},
): Promise<Answer> {
  const { port } = new URL(ingress.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: { host, ...options.headers },
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
    );
    req.on('error', reject);
    for (const chunk of options.chunks ?? []) req.write(chunk);
    req.end();
  });
}

test('the replica gets the request as sent, less connection-only headers, with X-Forwarded-*; the client gets its answer', async () => {
  const answer = await send('echo.apps.test', {
    path: '/a/b?c=1&d',
    headers: {
      connection: 'keep-alive, x-hop',
      'x-hop': 'dropped',
      'keep-alive': 'timeout=5',
      'x-kept': 'yes',
    },
  });
  assert.equal(answer.status, 200, answer.body);
  assert.equal(answer.headers['x-from'], 'replica');
  assert.notEqual(
    answer.headers['keep-alive'],
    'timeout=99',
    "the replica's keep-alive is about its own connection",
  );
  const seen = JSON.parse(answer.body);
  assert.equal(seen.method, 'GET');
  assert.equal(seen.url, '/a/b?c=1&d');
  assert.equal(seen.headers.host, 'echo.apps.test');
  assert.equal(seen.headers['x-kept'], 'yes');
  assert.equal(seen.headers['x-hop'], undefined, 'a header the Connection header names is hop-by-hop');
  assert.equal(seen.headers['keep-alive'], undefined);
  assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
  assert.equal(seen.headers['x-forwarded-proto'], 'http');
});

test('a streamed body reaches the replica whole, and is cut with a 413 once over request_body_size', async () => {
  const small = await send('echo.apps.test', {
    method: 'POST',
    chunks: [Buffer.alloc(1000, 'x'), Buffer.alloc(500, 'y')],
  });
  assert.equal(small.status, 200, small.body);
  assert.equal(JSON.parse(small.body).bytes, 1500);
  // Chunked, so no Content-Length announces it: the limit (1 MB) is found while it streams.
  const big = await send('echo.apps.test', {
    method: 'POST',
    chunks: Array.from({ length: 3 }, () => Buffer.alloc(512 * 1024, 'z')),
  });
  assert.equal(big.status, 413, big.body);
  assert.equal(big.body, 'request bodies are limited to 1 MB\n');
});

test('a path that climbs out of its directory is refused with a 400', async () => {
  for (const climbing of ['/a/../etc/passwd', '/%2e%2e/secret']) {
    const answer = await send('echo.apps.test', { path: climbing });
    assert.equal(answer.status, 400, climbing);
  }
});

test('a replica that cannot be reached is a plain 502 that names no address', async () => {
  const answer = await send('gone.apps.test');
  assert.equal(answer.status, 502);
  assert.equal(answer.body, 'the service could not be reached\n');
  assert.doesNotMatch(answer.body, /127\.0\.0\.1|ECONNREFUSED/);
});

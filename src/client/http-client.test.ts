import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { HttpClient } from './http-client.ts';

/** A server that drops the first connection of every POST (the answer is lost), then answers. */
const seen: { method: string; key: string | undefined }[] = [];
const server = http.createServer((request, response) => {
  seen.push({ method: request.method ?? '', key: request.headers['idempotency-key'] as string | undefined });
  if (seen.length % 2 === 1) {
    request.socket.destroy();
    return;
  }
  response.setHeader('content-type', 'application/json');
  response.end(JSON.stringify({ message: 'success', data: { ok: true } }));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
after(() => server.close());
const client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'token');

test('a POST whose answer was lost is retried with the same Idempotency-Key', async () => {
  assert.deepEqual(await client.call('POST', '/things', { a: 1 }), { ok: true });
  assert.equal(seen.length, 2);
  assert.ok(seen[0]?.key);
  assert.equal(seen[1]?.key, seen[0]?.key);
  // A new call is a new request: a new key.
  await client.call('POST', '/things', { a: 1 });
  assert.notEqual(seen[2]?.key, seen[0]?.key);
  assert.equal(seen[3]?.key, seen[2]?.key);
  // GETs are retried too, and carry no key.
  await client.call('GET', '/things');
  assert.equal(seen[4]?.key, undefined);
});

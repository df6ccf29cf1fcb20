import assert from 'node:assert/strict';
import type net from 'node:net';
import { after, describe, test } from 'node:test';
import { startHarness } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';
import { connect, malformedRequests, parseRawResponse, rawRequest, sendRaw } from '../helpers/raw-http.ts';

/**
 * What reaches the listening socket before (or instead of) a well-formed request: malformed HTTP is
 * answered in the spec's error shape, and no client holds a connection open past the bounds set by
 * BERTH_REQUEST_TIMEOUT_MS, BERTH_HEADERS_TIMEOUT_MS and BERTH_KEEP_ALIVE_TIMEOUT_MS (small here).
 */
const BOUND = { requestTimeoutMs: 1000, headersTimeoutMs: 600, keepAliveTimeoutMs: 600 };
const h = await startHarness(BOUND);
after(() => h.close());
const t = await h.tenant();
await h.app.listen({ port: 0, host: '127.0.0.1' });
const servicesUrl = `/v1/environments/${t.envId}/services`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Collects what the server sends and notes when it closes the connection. */
function watch(socket: net.Socket): { text: () => string; closedAt: () => number | undefined } {
  let text = '';
  let closedAt: number | undefined;
  socket.on('data', (chunk) => {
    text += chunk.toString('latin1');
  });
  socket.on('close', () => {
    closedAt = Date.now();
  });
  socket.on('error', () => {});
  return { text: () => text, closedAt: () => closedAt };
}

/** Writes one byte every 100 ms until the connection closes: a client that never finishes. */
function trickle(socket: net.Socket, byte: string): void {
  const timer = setInterval(() => {
    if (socket.destroyed) clearInterval(timer);
    else socket.write(byte);
  }, 100);
  socket.on('close', () => clearInterval(timer));
}

/** The bound plus Node's checking interval and scheduling slack: far below "forever". */
const CLOSE_DEADLINE_MS = 4000;

async function closedWithin(socket: net.Socket, closedAt: () => number | undefined, startedAt: number) {
  try {
    await pollUntil('the server to close the connection', async () => closedAt(), {
      timeoutMs: CLOSE_DEADLINE_MS,
    });
  } finally {
    socket.destroy();
  }
  return (closedAt() as number) - startedAt;
}

describe('malformed HTTP', () => {
  for (const { name, raw } of malformedRequests(servicesUrl, t.token)) {
    test(`${name}: the spec's error shape with an x-request-id, and the connection closed`, async () => {
      const res = await sendRaw(h.app, raw);
      assert.ok([400, 431].includes(res.status), `${res.status} ${res.body}`);
      assert.match(res.headers['content-type'] ?? '', /^application\/json/);
      assert.match(res.headers['x-request-id'] ?? '', UUID);
      const body = JSON.parse(res.body);
      assert.deepEqual(Object.keys(body), ['error_code', 'message', 'errors']);
      assert.equal(body.error_code, 'validation');
      assert.equal(body.errors, null);
      assert.match(body.message, res.status === 431 ? /headers are larger than 16 KB/ : /not valid HTTP/);
      assert.equal(res.closed, true);
    });
  }

  test('the reason names the framing fault, never the bytes sent', async () => {
    const [twoLengths] = malformedRequests(servicesUrl, t.token);
    const res = await sendRaw(h.app, twoLengths?.raw as string);
    assert.equal(
      JSON.parse(res.body).message,
      'The request is not valid HTTP/1.1 (Duplicate Content-Length)',
    );
    const nul = malformedRequests(servicesUrl, t.token).find((c) => c.name.includes('NUL'));
    const body = (await sendRaw(h.app, nul?.raw as string)).body;
    assert.ok(!body.includes('x-note') && !body.includes('a\u0000b'), body);
  });

  test('an HTTP/1.1 request without Host, and an Expect other than 100-continue, are answered in the error shape', async () => {
    const noHost = await sendRaw(
      h.app,
      rawRequest('GET', '/v1/environments', [
        ['authorization', `Bearer ${t.token}`],
        ['connection', 'close'],
      ]),
    );
    assert.equal(noHost.status, 400, noHost.body);
    assert.match(noHost.headers['x-request-id'] ?? '', UUID);
    assert.match(noHost.headers['content-type'] ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(noHost.body), {
      error_code: 'validation',
      message: 'An HTTP/1.1 request must have a Host header',
      errors: null,
    });

    const expect = await sendRaw(
      h.app,
      rawRequest('GET', '/v1/environments', [
        ['host', 'localhost'],
        ['authorization', `Bearer ${t.token}`],
        ['expect', '200-ok'],
        ['connection', 'close'],
      ]),
    );
    assert.equal(expect.status, 417, expect.body);
    assert.match(expect.headers['x-request-id'] ?? '', UUID);
    assert.match(expect.headers['content-type'] ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(expect.body), {
      error_code: 'validation',
      message: 'The Expect header cannot be met: the only expectation served is 100-continue',
      errors: null,
    });
  });

  test('a well-formed request on the same server still answers normally', async () => {
    const res = await sendRaw(
      h.app,
      rawRequest('GET', '/v1/environments', [
        ['host', 'localhost'],
        ['authorization', `Bearer ${t.token}`],
        ['connection', 'close'],
      ]),
    );
    assert.equal(res.status, 200);
  });
});

describe('slow clients', () => {
  const bodyHead = (token: string | null) =>
    rawRequest('POST', servicesUrl, [
      ['host', 'localhost'],
      ...(token ? ([['authorization', `Bearer ${token}`]] as [string, string][]) : []),
      ['content-type', 'application/json'],
      ['content-length', '100000'],
    ]);

  test('a body trickled with a valid token gets 408 in the error shape once the request time is up', async () => {
    const socket = await connect(h.app);
    const seen = watch(socket);
    const startedAt = Date.now();
    socket.write(bodyHead(t.token));
    trickle(socket, ' ');
    const ms = await closedWithin(socket, seen.closedAt, startedAt);
    assert.ok(ms >= BOUND.requestTimeoutMs - 100, `closed after ${ms} ms, before the bound`);
    const res = parseRawResponse(seen.text(), true);
    assert.equal(res.status, 408);
    assert.match(res.headers['x-request-id'] ?? '', UUID);
    assert.deepEqual(JSON.parse(res.body), {
      error_code: 'validation',
      message: 'The request did not arrive within 1 seconds',
      errors: null,
    });
  });

  test('a body trickled without a token gets its 401, then the connection is closed', async () => {
    const socket = await connect(h.app);
    const seen = watch(socket);
    const startedAt = Date.now();
    socket.write(bodyHead(null));
    trickle(socket, ' ');
    await closedWithin(socket, seen.closedAt, startedAt);
    const res = parseRawResponse(seen.text(), true);
    assert.equal(res.status, 401);
    // Nothing follows the 401 on the same connection.
    assert.equal(seen.text().split('HTTP/1.1').length, 2, seen.text());
  });

  test('headers trickled one byte at a time are cut off at the headers bound', async () => {
    const socket = await connect(h.app);
    const seen = watch(socket);
    const startedAt = Date.now();
    socket.write('GET /v1/environments HTTP/1.1\r\nhost: localhost\r\n');
    trickle(socket, 'x');
    const ms = await closedWithin(socket, seen.closedAt, startedAt);
    assert.ok(ms >= BOUND.headersTimeoutMs - 100, `closed after ${ms} ms, before the bound`);
    assert.equal(parseRawResponse(seen.text(), true).status, 408);
  });

  test('an idle keep-alive connection is closed after the keep-alive bound', async () => {
    const socket = await connect(h.app);
    const seen = watch(socket);
    socket.write(
      rawRequest('GET', '/v1/environments', [
        ['host', 'localhost'],
        ['authorization', `Bearer ${t.token}`],
      ]),
    );
    await pollUntil('the answer', async () => (seen.text().includes('\r\n\r\n') ? true : undefined));
    assert.equal(parseRawResponse(seen.text(), false).status, 200);
    const answeredAt = Date.now();
    const ms = await closedWithin(socket, seen.closedAt, answeredAt);
    assert.ok(ms >= BOUND.keepAliveTimeoutMs - 200, `closed after ${ms} ms, before the bound`);
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryingFetch, UnreachableError } from './retry.ts';

/** A fetch that fails (or answers) as `answer` says, recording each method it was sent. */
function recorder(answer: (request: Request) => Response | Error) {
  const sent: string[] = [];
  const inner = async (request: Request) => {
    sent.push(`${request.method} ${request.headers.has('idempotency-key') ? 'key' : 'no key'}`);
    const a = answer(request);
    if (a instanceof Error) throw a;
    return a;
  };
  const fetch = retryingFetch({ attempts: 3, wait: async () => undefined }, inner as typeof globalThis.fetch);
  return { sent, fetch };
}

const URL_ = 'http://127.0.0.1:1/v1/environments/e1/services/s1';
const lost = () => new TypeError('fetch failed');

test('a PATCH whose answer was lost is sent once (it may have been done), and says the server was not reached', async () => {
  const { sent, fetch } = recorder(lost);
  await assert.rejects(fetch(new Request(URL_, { method: 'PATCH', body: '{"name":"x"}' })), UnreachableError);
  assert.deepEqual(sent, ['PATCH no key']);
});

test('a PATCH, PUT or DELETE answered 5xx is not sent again; on 429 (nothing was done) it is', async () => {
  for (const method of ['PATCH', 'PUT', 'DELETE']) {
    const { sent, fetch } = recorder(() => new Response('{}', { status: 503 }));
    assert.equal((await fetch(new Request(URL_, { method }))).status, 503);
    assert.deepEqual(sent, [`${method} no key`]);
  }
  const { sent, fetch } = recorder(() => new Response('{}', { status: 429 }));
  assert.equal((await fetch(new Request(URL_, { method: 'PATCH' }))).status, 429);
  assert.equal(sent.length, 3);
});

test('an abort is never retried, whatever the method', async () => {
  for (const method of ['GET', 'POST', 'PATCH']) {
    const { sent, fetch } = recorder(() => new DOMException('The operation was aborted.', 'AbortError'));
    await assert.rejects(fetch(new Request(URL_, { method })), { name: 'AbortError' });
    assert.equal(sent.length, 1, method);
  }
  const controller = new AbortController();
  const { sent, fetch } = recorder(() => {
    controller.abort();
    return lost();
  });
  await assert.rejects(fetch(new Request(URL_, { method: 'GET', signal: controller.signal })));
  assert.equal(sent.length, 1);
});

test('a GET, and a POST (with its Idempotency-Key), are retried when the answer is lost', async () => {
  for (const method of ['GET', 'POST']) {
    const { sent, fetch } = recorder(lost);
    await assert.rejects(fetch(new Request(URL_, { method })), UnreachableError);
    assert.deepEqual(sent, Array(3).fill(`${method} ${method === 'POST' ? 'key' : 'no key'}`));
  }
});

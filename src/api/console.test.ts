import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type TestContext, test } from 'node:test';
import Fastify from 'fastify';
import { CONSOLE_CSP, consoleBuilt, registerConsole } from './console.ts';

/** A directory of the test's own, removed after it whatever its outcome. */
function tempDir(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-console-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a console that was never built: GET / says how to build it, with 503', async (t) => {
  const dist = path.join(tempDir(t), 'dist');
  assert.equal(consoleBuilt(dist), false);
  const app = Fastify();
  await registerConsole(app, dist);
  const res = await app.inject({ method: 'GET', url: '/' });
  assert.equal(res.statusCode, 503);
  assert.match(res.body, /npm run build:console/);
  await app.close();
});

test('a built console: its page carries the CSP, its hashed assets are cached for good, and it answers no other path', async (t) => {
  const dist = tempDir(t);
  fs.mkdirSync(path.join(dist, 'assets'));
  fs.writeFileSync(path.join(dist, 'index.html'), '<!doctype html><title>t</title>');
  fs.writeFileSync(path.join(dist, 'assets/index-abc123.js'), 'export {};');
  fs.writeFileSync(path.join(dist, '.secret'), 'no');
  assert.equal(consoleBuilt(dist), true);
  const app = Fastify();
  await registerConsole(app, dist);
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error_code: 'notfound' }));

  const page = await app.inject({ method: 'GET', url: '/' });
  assert.equal(page.statusCode, 200);
  assert.match(String(page.headers['content-type']), /text\/html/);
  assert.equal(page.headers['content-security-policy'], CONSOLE_CSP);
  assert.equal(page.headers['cache-control'], 'no-cache');
  assert.equal(page.headers['x-content-type-options'], 'nosniff');

  const asset = await app.inject({ method: 'GET', url: '/assets/index-abc123.js' });
  assert.equal(asset.statusCode, 200);
  assert.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal(asset.headers['content-security-policy'], undefined);

  for (const url of ['/v1/nothing', '/assets/missing.js', '/.secret']) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 404, url);
    assert.deepEqual(res.json(), { error_code: 'notfound' }, url);
  }
  await app.close();
});

test("a console rebuilt while the server runs: the new page's assets are served too", async (t) => {
  const dist = tempDir(t);
  fs.mkdirSync(path.join(dist, 'assets'));
  fs.writeFileSync(path.join(dist, 'index.html'), '<script src="/assets/index-old.js"></script>');
  fs.writeFileSync(path.join(dist, 'assets/index-old.js'), 'export {};');
  const app = Fastify();
  await registerConsole(app, dist);
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error_code: 'notfound' }));
  // What a build does: the old assets removed, new ones named by the new page.
  fs.rmSync(path.join(dist, 'assets/index-old.js'));
  fs.writeFileSync(path.join(dist, 'assets/index-new.js'), 'export {};');
  fs.writeFileSync(path.join(dist, 'index.html'), '<script src="/assets/index-new.js"></script>');

  assert.match((await app.inject({ method: 'GET', url: '/' })).body, /index-new\.js/);
  const asset = await app.inject({ method: 'GET', url: '/assets/index-new.js' });
  assert.equal(asset.statusCode, 200);
  assert.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal(asset.headers['x-content-type-options'], 'nosniff');
  for (const url of ['/assets/index-old.js', '/assets/missing.js', '/assets/..%2f..%2fpackage.json']) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 404, url);
    assert.deepEqual(res.json(), { error_code: 'notfound' }, url);
  }
  await app.close();
});

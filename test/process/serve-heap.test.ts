import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { serverFixture } from '../helpers/server.ts';

/** `berth serve` starts itself again with V8's young-generation floor (bin/berth.js, NEW_SPACE). */
const servers = serverFixture('sim');

test('berth serve runs, in the process its caller started, with a young generation of at least 2 x 16 MB', async () => {
  const server = await servers.serve();
  // execve keeps the pid: the process the caller holds (and signals) is the server, started with the flag.
  const argv = fs.readFileSync(`/proc/${server.child.pid}/cmdline`, 'utf8').split('\0');
  assert.ok(argv.includes('--min-semi-space-size=16'), argv.join(' '));
  assert.ok(argv.includes('serve'), argv.join(' '));
  assert.equal(await server.kill('SIGTERM'), 0, server.stderr());
});

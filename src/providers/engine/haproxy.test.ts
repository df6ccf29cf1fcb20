import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DEFAULT_OPS_CONFIG } from '../../domain/ops-json.ts';
import { haproxyThreads, renderHaproxy, runtime } from './haproxy.ts';

/** The configuration's sections by their opening line (`frontend https`), each with its own lines. */
function sections(config: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of config.split('\n')) {
    if (line === '') continue;
    if (line.startsWith(' ')) {
      current.push(line.trim());
    } else {
      current = [];
      found.set(line, current);
    }
  }
  return found;
}

const render = (alpnResponder?: string) =>
  sections(
    renderHaproxy({
      bind: '127.0.0.1',
      port: 8443,
      dir: '/run/berth-haproxy-test',
      threads: 3,
      alpnResponder,
      table: {
        routes: [
          {
            serviceId: 's1',
            hosts: ['www.example.test'],
            targets: ['10.0.0.2:8080'],
            ops: DEFAULT_OPS_CONFIG,
          },
        ],
        certificates: new Map(),
      },
    }).config,
  );

test('HAProxy runs one thread per two cores, at least one', () => {
  assert.deepEqual([1, 2, 3, 4, 16].map(haproxyThreads), [1, 1, 1, 2, 8]);
  assert.ok(render().get('global')?.includes('nbthread 3'));
});

test('no frontend logs a line per request; the backends keep the global log', () => {
  for (const config of [render(), render('127.0.0.1:9999')]) {
    const frontends = [...config.keys()].filter((name) => name.startsWith('frontend '));
    assert.ok(frontends.length > 0);
    for (const name of frontends) assert.ok(config.get(name)?.includes('no log'), `${name} logs`);
    assert.ok(config.get('defaults')?.includes('log global'));
    assert.ok(!config.get('backend svc_s1')?.includes('no log'));
  }
});

test('a runtime socket that never answers fails the exchange after its deadline, so the sync goes on', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-haproxy-runtime-'));
  const socketPath = path.join(dir, 'admin.sock');
  const held: net.Socket[] = [];
  const silent = net.createServer((socket) => void held.push(socket));
  await new Promise<void>((resolve) => silent.listen(socketPath, resolve));
  try {
    await assert.rejects(runtime(socketPath, ['show info'], 100), /did not answer within 100 ms/);
  } finally {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

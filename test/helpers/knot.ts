import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pollUntil, StopPolling } from './poll.ts';

/**
 * A real authoritative DNS server that takes RFC 2136 updates signed with TSIG: Debian's Knot DNS
 * (knotd), run from a temporary directory on a loopback UDP/TCP port, serving one zone from records the
 * test gives, with a key allowed to update only the TXT records of the names given (docs/https.md's ACL).
 */
export interface KnotServer {
  /** `127.0.0.1:port`: BERTH_ACME_DNS_SERVER, pebble's -dnsserver. */
  address: string;
  zone: string;
  key: { name: string; algorithm: string; secret: string };
  /** The values of a name's TXT records as the server answers now (kdig). */
  txt(name: string): string[];
  close(): Promise<void>;
}

export function knotAvailable(): boolean {
  return fs.existsSync('/usr/sbin/knotd') && fs.existsSync('/usr/bin/kdig');
}

export async function startKnot(options: {
  port: number;
  zone: string;
  /** Zone file lines after the SOA and NS, relative to the zone (`www A 127.0.0.1`). */
  records: string[];
  /** The TXT names (relative to the zone) the key may update, as docs/https.md's ACL allows one. */
  updatable: string[];
}): Promise<KnotServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-knot-'));
  const key = { name: 'berth-acme', algorithm: 'hmac-sha256', secret: randomBytes(32).toString('base64') };
  fs.writeFileSync(
    path.join(dir, `${options.zone}.zone`),
    [
      `$ORIGIN ${options.zone}.`,
      '$TTL 1',
      `@ SOA ns.${options.zone}. hostmaster.${options.zone}. 1 3600 600 86400 1`,
      '@ NS ns',
      'ns A 127.0.0.1',
      ...options.records,
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(dir, 'knot.conf'),
    `server:
    listen: 127.0.0.1@${options.port}
    rundir: "${dir}"
log:
  - target: stderr
    any: info
database:
    storage: "${dir}"
key:
  - id: ${key.name}
    algorithm: ${key.algorithm}
    secret: ${key.secret}
acl:
  - id: berth-update
    key: ${key.name}
    action: update
    update-type: TXT
    update-owner: name
    update-owner-match: equal
    update-owner-name: [${options.updatable.join(', ')}]
template:
  - id: default
    storage: "${dir}"
    file: "%s.zone"
    zonefile-sync: -1
    journal-content: changes
zone:
  - domain: ${options.zone}
    acl: berth-update
`,
  );
  let log = '';
  const child: ChildProcess = spawn('/usr/sbin/knotd', ['-c', path.join(dir, 'knot.conf')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk) => {
    log += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    log += chunk;
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const dig = (name: string, type: string) =>
    execFileSync('kdig', [`@127.0.0.1`, '-p', String(options.port), '+short', '+timeout=2', name, type], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  try {
    await pollUntil(
      'knotd to serve the zone',
      async () => {
        if (child.exitCode !== null) throw new StopPolling(`knotd exited: ${log}`);
        try {
          return dig(options.zone, 'SOA').trim() ? true : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 30_000 },
    );
  } catch (error) {
    await close();
    throw error;
  }
  return {
    address: `127.0.0.1:${options.port}`,
    zone: options.zone,
    key,
    txt: (name) =>
      dig(name, 'TXT')
        .split('\n')
        .filter(Boolean)
        .map((line) => line.replace(/^"|"$/g, '')),
    close,
  };
}

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { pollUntil, StopPolling } from './poll.ts';

/**
 * A real ACME server: Debian's pebble (Let's Encrypt's test CA), which validates HTTP-01 on port 80,
 * TLS-ALPN-01 on port 443 and DNS-01 by TXT lookups, resolving every name through the DNS server the
 * test runs (`-dnsserver`). Its directory is served over HTTPS with a certificate made here; the root it
 * issues under is made afresh each run and read from its management interface.
 */
export interface Pebble {
  directoryUrl: string;
  /** The certificate of the directory's own HTTPS: BERTH_ACME_CA_FILE. */
  directoryCaFile: string;
  /** The root of the certificates it issues (PEM): what a client trusting only the test CA trusts. */
  rootPem: string;
  close(): Promise<void>;
}

export function pebbleAvailable(): boolean {
  return fs.existsSync('/usr/bin/pebble') && fs.existsSync('/usr/bin/openssl');
}

function get(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    https
      .get(url, { ca, timeout: 5_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', () => resolve({ status: 0, body: '' }));
  });
}

export async function startPebble(options: {
  port: number;
  managementPort: number;
  /** `host:port` of the DNS server every validation resolves names through. */
  dnsServer: string;
  /** The port HTTP-01 validations connect to (80); a closed one makes HTTP-01 fail. */
  httpPort?: number;
}): Promise<Pebble> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-pebble-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  fs.writeFileSync(
    path.join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${options.port}`,
        managementListenAddress: `127.0.0.1:${options.managementPort}`,
        certificate: cert,
        privateKey: key,
        httpPort: options.httpPort ?? 80,
        tlsPort: 443,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  let log = '';
  const child: ChildProcess = spawn(
    '/usr/bin/pebble',
    ['-config', path.join(dir, 'pebble.json'), '-dnsserver', options.dnsServer],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // No random waits before validations, no rejected nonces, every authorization validated afresh.
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
    },
  );
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
  try {
    const ca = fs.readFileSync(cert, 'utf8');
    const directoryUrl = `https://127.0.0.1:${options.port}/dir`;
    const rootPem = await pollUntil(
      'pebble to answer',
      async () => {
        if (child.exitCode !== null) throw new StopPolling(`pebble exited: ${log}`);
        if ((await get(directoryUrl, ca)).status !== 200) return undefined;
        const root = await get(`https://127.0.0.1:${options.managementPort}/roots/0`, ca);
        return root.status === 200 ? root.body : undefined;
      },
      { timeoutMs: 30_000 },
    );
    return { directoryUrl, directoryCaFile: cert, rootPem, close };
  } catch (error) {
    await close();
    throw error;
  }
}

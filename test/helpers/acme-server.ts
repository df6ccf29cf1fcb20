import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { pollUntil, StopPolling } from './poll.ts';

/**
 * A real ACME server: Debian's caddy with its `acme_server` handler and its own root CA, on a loopback
 * address. Its HTTP-01 validations connect to port 80 of each name; caddy runs in a mount namespace of
 * its own (`unshare -m`) whose /etc/hosts maps the test's names to `address`, so the machine's
 * resolution is left alone and every validation reaches the ingress the test runs on `address`:80.
 */
export interface AcmeServer {
  directoryUrl: string;
  /** The root CA's certificate (PEM): what a client trusting only the test CA trusts. */
  rootPem: string;
  rootFile: string;
  close(): Promise<void>;
}

export function caddyAvailable(): boolean {
  return fs.existsSync('/usr/bin/caddy') && fs.existsSync('/usr/bin/unshare') && process.getuid?.() === 0;
}

export async function startAcmeServer(options: {
  address: string;
  port: number;
  /** The names HTTP-01 validation resolves to `address`. */
  names: string[];
}): Promise<AcmeServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-acme-'));
  const hosts = path.join(dir, 'hosts');
  fs.writeFileSync(
    hosts,
    `127.0.0.1 localhost\n${options.names.map((name) => `${options.address} ${name}`).join('\n')}\n`,
  );
  const config = {
    admin: { disabled: true },
    storage: { module: 'file_system', root: path.join(dir, 'data') },
    apps: {
      http: {
        http_port: options.port + 1,
        https_port: options.port,
        servers: {
          acme: {
            listen: [`${options.address}:${options.port}`],
            automatic_https: { disable_redirects: true },
            routes: [{ handle: [{ handler: 'acme_server' }] }],
            tls_connection_policies: [{}],
          },
        },
      },
      pki: { certificate_authorities: { local: { install_trust: false } } },
      tls: {
        certificates: { automate: [options.address] },
        automation: { policies: [{ issuers: [{ module: 'internal' }] }] },
      },
    },
  };
  fs.writeFileSync(path.join(dir, 'caddy.json'), JSON.stringify(config));
  let log = '';
  const child: ChildProcess = spawn(
    'unshare',
    [
      '-m',
      'sh',
      '-c',
      `mount --bind "${hosts}" /etc/hosts && exec caddy run --config "${path.join(dir, 'caddy.json')}"`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HOME: dir } },
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
    const rootFile = path.join(dir, 'data/pki/authorities/local/root.crt');
    const directoryUrl = `https://${options.address}:${options.port}/acme/local/directory`;
    const rootPem = await pollUntil(
      'the ACME server to answer',
      async () => {
        if (child.exitCode !== null) throw new StopPolling(`caddy exited: ${log}`);
        if (!fs.existsSync(rootFile)) return undefined;
        const ca = fs.readFileSync(rootFile, 'utf8');
        const status = await new Promise<number>((resolve) => {
          https
            .get(directoryUrl, { ca }, (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            })
            .on('error', () => resolve(0));
        });
        return status === 200 ? ca : undefined;
      },
      { timeoutMs: 30_000 },
    );
    return {
      directoryUrl,
      rootPem,
      rootFile,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './docker.ts';
import { pollUntil, StopPolling } from './poll.ts';
import { selfSignedCertificate } from './self-signed.ts';

/**
 * A real ACME CA: Debian's `pebble`, with certificates of `validitySeconds`, validating HTTP-01 on
 * `httpPort`, TLS-ALPN-01 on `tlsPort` and DNS-01 by TXT lookups, of whatever its `-dnsserver` (the test's DNS server) resolves each name to. In front of its
 * directory, a reverse proxy of the test's counts the orders: every newOrder POST, by name (pebble
 * builds its URLs from the Host it is asked at, so the client never goes around the proxy). The proxy can
 * also hold the answer to a name's next newOrder, after the CA made the order: a client killed meanwhile
 * never learns its URL.
 */
export interface Pebble {
  /** The directory, through the counting proxy. */
  directoryUrl: string;
  /** The certificate of pebble's own HTTPS listener (and the proxy's): BERTH_ACME_CA_FILE. */
  listenerCertFile: string;
  /** Pebble's root CA (made at each start), from its management port: what a client trusting only the CA trusts. */
  rootPem: string;
  /** The name of every newOrder the CA answered, in order. */
  orders: string[];
  /** Resolves when the CA made the next order for `name`; its answer is never sent. */
  holdNextOrder(name: string): Promise<void>;
  log(): string;
  close(): Promise<void>;
}

export function pebbleAvailable(): boolean {
  return fs.existsSync('/usr/bin/pebble') && fs.existsSync('/usr/bin/openssl');
}

/** A test of pebble and HAProxy: CI installs both (.ci/run), so there it runs, or fails saying what is missing. */
export function haproxyAcmeSkip(): false | string {
  return (pebbleAvailable() && fs.existsSync('/usr/sbin/haproxy')) || process.env.CI
    ? false
    : 'needs /usr/bin/pebble, openssl and /usr/sbin/haproxy';
}

/**
 * Berth's settings for a test of HAProxy serving ACME certificates: apps.`zone` behind HAProxy on
 * 127.0.0.1 with HTTPS on `httpsPort`, certificates from `pebble` for names `dns` resolves, scanned each
 * second, a failure not retried within the test, and no rate limit (the tests' polls are not a client's).
 */
export function haproxyAcmeSettings(
  zone: string,
  { pebble, dnsServer, httpsPort }: { pebble: Pebble; dnsServer: string; httpsPort: number },
): Record<string, string> {
  return {
    BERTH_INGRESS_PROXY: 'haproxy',
    BERTH_INGRESS_BIND: '127.0.0.1',
    BERTH_INGRESS_HTTPS_PORT: String(httpsPort),
    BERTH_INGRESS_HOST: `apps.${zone}`,
    BERTH_DNS_SERVERS: dnsServer,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: `ops@${zone}`,
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    BERTH_ACME_SCAN_MS: '1000',
    BERTH_ACME_RETRY_BASE_MS: '3600000',
    BERTH_RATE_LIMIT_PER_MIN: '1000000',
  };
}

function get(url: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    https
      .get(url, { ca }, (res) => {
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

/** The names a newOrder JWS asks for (its payload is base64url JSON). */
function orderedNames(body: Buffer): string[] {
  try {
    const jws = JSON.parse(body.toString('utf8')) as { payload: string };
    const payload = JSON.parse(Buffer.from(jws.payload, 'base64url').toString('utf8')) as {
      identifiers: { value: string }[];
    };
    return payload.identifiers.map((i) => i.value);
  } catch {
    return [];
  }
}

export async function startPebble(options: {
  httpPort: number;
  dnsServer: string;
  validitySeconds: number;
  address?: string;
  /** The port TLS-ALPN-01 validations connect to; unset, one nothing listens on. */
  tlsPort?: number;
}): Promise<Pebble> {
  const address = options.address ?? '127.0.0.1';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-pebble-'));
  const {
    certFile,
    keyFile,
    cert: listenerCert,
    key: listenerKey,
  } = selfSignedCertificate(dir, {
    label: 'cert',
    commonName: 'pebble',
    subjectAltName: `IP:${address}`,
    days: 2,
  });
  const acmePort = await freePort();
  const managementPort = await freePort();
  fs.writeFileSync(
    path.join(dir, 'pebble.json'),
    JSON.stringify({
      pebble: {
        listenAddress: `${address}:${acmePort}`,
        managementListenAddress: `${address}:${managementPort}`,
        certificate: certFile,
        privateKey: keyFile,
        httpPort: options.httpPort,
        tlsPort: options.tlsPort ?? (await freePort()),
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
        certificateValidityPeriod: options.validitySeconds,
      },
    }),
  );
  let log = '';
  const child: ChildProcess = spawn(
    'pebble',
    ['-config', path.join(dir, 'pebble.json'), '-dnsserver', options.dnsServer],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // No artificial validation delays, and no nonces rejected at random: what is tested is Berth.
      env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0' },
    },
  );
  child.stdout?.on('data', (chunk) => {
    log += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    log += chunk;
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));

  const orders: string[] = [];
  const holds = new Map<string, () => void>();
  const proxy = https.createServer({ cert: listenerCert, key: listenerKey }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const names = req.method === 'POST' && req.url === '/order-plz' ? orderedNames(body) : [];
      const upstream = https.request(
        {
          host: address,
          port: acmePort,
          method: req.method,
          path: req.url,
          // The Host the client used: pebble's URLs then point at the proxy.
          headers: req.headers,
          ca: listenerCert,
        },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => parts.push(chunk));
          answer.on('end', () => {
            if (names.length > 0 && answer.statusCode === 201) {
              orders.push(...names);
              const held = names.map((n) => holds.get(n)).find(Boolean);
              if (held) {
                for (const n of names) holds.delete(n);
                held();
                return;
              }
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(parts));
          });
        },
      );
      upstream.on('error', () => {
        res.writeHead(502);
        res.end();
      });
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, address, resolve));
  const proxyPort = (proxy.address() as AddressInfo).port;

  const close = async () => {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const directoryUrl = `https://${address}:${proxyPort}/dir`;
    const rootPem = await pollUntil(
      'pebble to answer',
      async () => {
        if (child.exitCode !== null) throw new StopPolling(`pebble exited: ${log}`);
        const directory = await get(directoryUrl, listenerCert);
        if (directory.status !== 200) return undefined;
        const root = await get(`https://${address}:${managementPort}/roots/0`, listenerCert);
        return root.status === 200 ? root.body : undefined;
      },
      { timeoutMs: 30_000 },
    );
    return {
      directoryUrl,
      listenerCertFile: certFile,
      rootPem,
      orders,
      holdNextOrder: (name) => new Promise((resolve) => holds.set(name, resolve)),
      log: () => log,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

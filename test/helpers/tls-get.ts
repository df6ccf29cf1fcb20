import type http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { PeerCertificate, TLSSocket } from 'node:tls';

/** What one GET over HTTPS got: the status, headers and body, and the certificate the server showed. */
export interface TlsAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  cert: PeerCertificate;
}

/**
 * One GET over a new TLS connection (no agent, no session reuse) to `host:port` with SNI and Host
 * `name`, trusting only `ca`: Node checks the chain and the host name, so a wrong certificate is an error.
 * The timeout is generous by default: a loaded CI machine may stall a request for seconds, and what a
 * test counts as a failure is an error or a status, not slowness.
 */
export function tlsGet(options: {
  port: number;
  name: string;
  ca: string;
  host?: string;
  path?: string;
  timeoutMs?: number;
}): Promise<TlsAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      {
        host: options.host ?? '127.0.0.1',
        port: options.port,
        servername: options.name,
        headers: { host: options.name },
        ca: options.ca,
        agent: false,
        path: options.path ?? '/',
        timeout: options.timeoutMs ?? 30_000,
      },
      (res) => {
        const cert = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, cert }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

/** What one GET over HTTP/2 got: the status, headers and body, and the protocol ALPN settled on. */
export interface H2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
  alpn: string | false;
}

/** One GET over a new HTTP/2 session to `url` with SNI and :authority `name`, trusting only `ca`. */
export async function h2Get(options: { url: string; name: string; ca: string }): Promise<H2Answer> {
  const session = http2.connect(options.url, { servername: options.name, ca: options.ca });
  try {
    return await new Promise((resolve, reject) => {
      session.on('error', reject);
      const req = session.request({ ':path': '/', ':authority': options.name });
      let headers: http2.IncomingHttpHeaders = {};
      let body = '';
      req.setEncoding('utf8');
      req.on('response', (h) => {
        headers = h;
      });
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () =>
        resolve({ status: Number(headers[':status']), headers, body, alpn: session.alpnProtocol ?? false }),
      );
      req.on('error', reject);
    });
  } finally {
    session.close();
  }
}

/**
 * Berth's TLS-ALPN-01 responder for HAProxy (RFC 8737): a TLS listener on the loopback address that
 * HAProxy passes each `acme-tls/1` connection to, undecrypted. It completes the CA's handshake with the
 * challenge's certificate for the name asked and serves nothing on it, as the Node ingress's HTTPS
 * listener does for the handshakes it takes itself.
 * @module
 */
import tls from 'node:tls';
import type { CertificateSource } from '../provider.ts';

export const ACME_TLS = 'acme-tls/1';

export interface AlpnResponder {
  /** `host:port` HAProxy sends `acme-tls/1` connections to. */
  address: string;
  close(): Promise<void>;
}

export async function startAlpnResponder(
  source: Pick<CertificateSource, 'alpnChallenge'>,
): Promise<AlpnResponder> {
  const server = tls.createServer({
    // Only the CA's validation comes here; a client offering anything else has no business with it.
    ALPNCallback: ({ protocols }) => (protocols.includes(ACME_TLS) ? ACME_TLS : undefined),
    // A name with no pending challenge has no context: its handshake fails.
    SNICallback(servername, callback) {
      source.alpnChallenge(servername.toLowerCase()).then(
        (pair) => callback(null, pair ? tls.createSecureContext(pair) : undefined),
        (error: Error) => callback(error),
      );
    },
  });
  // The validation is the handshake alone.
  server.on('secureConnection', (socket) => socket.end());
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

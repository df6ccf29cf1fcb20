import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from './metrics.ts';

export interface MetricsServer {
  /** http://host:port/metrics */
  url: string;
  close(): Promise<void>;
}

/**
 * BERTH_METRICS_BIND: `GET /metrics` in the Prometheus text format, on a listener of its own (no token:
 * bind it to loopback or a private address). Apart from the API port, so the API never exposes it and a
 * `berth worker`, which has no API, serves its own.
 */
export async function serveMetrics(
  metrics: Metrics,
  bind: { host: string; port: number },
): Promise<MetricsServer> {
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: GET /metrics\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (error: Error) => response.writeHead(500, { 'content-type': 'text/plain' }).end(`${error.message}\n`),
    );
  });
  server.listen(bind.port, bind.host);
  await once(server, 'listening');
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}/metrics`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

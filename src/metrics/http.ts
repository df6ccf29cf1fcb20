import type { FastifyInstance } from 'fastify';
import type { Metrics } from './metrics.ts';

/** Methods are a closed set in the label: anything else Node parses counts as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * One callback hook on every answered request. Its labels are the route template (`unmatched` when no
 * route matched: never the path a client sent), the method and the status; the labelled histogram of
 * each combination is looked up once and kept, so a request costs a map lookup and an observe.
 */
export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  const children = new Map<string, { observe(value: number): void }>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const method = METHODS.has(request.method) ? request.method : 'other';
    const status = reply.statusCode;
    const key = `${status} ${method} ${route}`;
    let child = children.get(key);
    if (!child) {
      child = metrics.httpRequests.labels({ route, method, status });
      children.set(key, child);
    }
    child.observe(reply.elapsedTime / 1000);
    done();
  });
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Metrics } from './metrics.ts';

/** Methods are a closed set in the label: anything else Node parses counts as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * What times each finished request (called by the app's log controller, plugins/access-log.ts, so no
 * hook phase is added). Its labels are the route template (`unmatched` when no route matched: never the
 * path a client sent), the method and the status; the labelled histogram of each combination is looked
 * up once and kept, so a request costs a map lookup and an observe.
 */
export function httpMetricsObserver(
  metrics: Metrics,
): (request: FastifyRequest, reply: FastifyReply) => void {
  const children = new Map<string, { observe(value: number): void }>();
  return (request, reply) => {
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
  };
}

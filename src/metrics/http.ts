import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Metrics } from './metrics.ts';

/** Methods are a closed set in the label: anything else Node parses counts as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Times one finished request: its route template, method, status and seconds to the last byte. */
export type HttpRecord = (route: string, method: string, status: number, seconds: number) => void;

/**
 * What times each finished request. Its labels are the route template (`unmatched` when no route
 * matched: never the path a client sent), the method and the status; the labelled histogram of each
 * combination is looked up once and kept, so a request costs a map lookup and an observe. Used by the
 * app's log controller (plugins/access-log.ts, so no hook phase is added) and by fast-polls.ts.
 */
export function httpMetricsRecord(metrics: Metrics): HttpRecord {
  const children = new Map<string, { observe(value: number): void }>();
  return (route, requestMethod, status, seconds) => {
    const method = METHODS.has(requestMethod) ? requestMethod : 'other';
    const key = `${status} ${method} ${route}`;
    let child = children.get(key);
    if (!child) {
      child = metrics.httpRequests.labels({ route, method, status });
      children.set(key, child);
    }
    child.observe(seconds);
  };
}

/** The same, told of a request Fastify answered. */
export function httpMetricsObserver(
  record: HttpRecord,
): (request: FastifyRequest, reply: FastifyReply) => void {
  return (request, reply) =>
    record(
      request.routeOptions.url ?? 'unmatched',
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
}

import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { isConsoleRoute } from '../../src/api/console.ts';

export interface Route {
  method: string;
  url: string;
  /** What the route declares (config.role, config.wholeAccount: docs/access.md). */
  role?: string | undefined;
  wholeAccount?: boolean;
}

/**
 * Records the API's routes from buildApp's `onRoute` hook, leaving out the HEAD routes Fastify adds by
 * itself and the console's static files (test/browser tests those).
 */
export function routeCollector() {
  const routes: Route[] = [];
  const onRoute = (route: {
    method: string | string[];
    url: string;
    config?: { role?: string; wholeAccount?: boolean };
  }) => {
    if (isConsoleRoute(route.url)) return;
    const role = route.config?.role;
    const wholeAccount = route.config?.wholeAccount === true;
    for (const method of [route.method].flat())
      if (method !== 'HEAD') routes.push({ method, url: route.url, role, wholeAccount });
  };
  return { routes, onRoute };
}

/** Every route the app registered, each checked against the router itself. */
export function registeredRoutes(h: { app: FastifyInstance; routes: readonly Route[] }): Route[] {
  for (const r of h.routes)
    assert.ok(
      h.app.hasRoute({ method: r.method, url: r.url } as never),
      `unknown route ${r.method} ${r.url}`,
    );
  assert.ok(h.routes.length > 0, 'the app registered routes');
  return [...h.routes];
}

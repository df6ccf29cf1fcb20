import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';

export interface Route {
  method: string;
  url: string;
}

/**
 * Every route the app registers, read from Fastify's route tree (`printRoutes`): each line is a node,
 * indented four characters per level, whose path continues its parent's (radix nodes may split a word,
 * e.g. `/deploy` then `ments`). HEAD routes that Fastify adds by itself are left out. The parse is
 * checked against the router itself, so a misread tree cannot pass unnoticed.
 */
export function registeredRoutes(app: FastifyInstance): Route[] {
  const routes: Route[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] as string).length / 4;
    const url = (stack[depth - 1] ?? '') + (m[2] as string);
    stack[depth] = url;
    stack.length = depth + 1;
    for (const method of m[3]?.split(', ') ?? []) if (method !== 'HEAD') routes.push({ method, url });
  }
  for (const r of routes) assert.ok(app.hasRoute(r as never), `misread route ${r.method} ${r.url}`);
  return routes;
}

import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/** Where `npm run build:console` (run by `npm install`'s prepare) writes the console. */
export const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));

/**
 * The console may load only its own files and talk only to this server: no inline script, no other
 * origin, no framing. The API itself needs no policy (it answers JSON).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Where an identity provider sends the browser back after single sign-on: the console's page (docs/sso.md). */
export const SSO_CALLBACK_ROUTE = '/sso/:accountId/callback';

/** The console's routes: its page and Vite's output (index.html and assets/), none of them API. */
export function isConsoleRoute(url: string): boolean {
  return (
    url === '/' ||
    url === '/index.html' ||
    url === SSO_CALLBACK_ROUTE ||
    url.startsWith('/assets/') ||
    url === DEVICE_PATH
  );
}

/**
 * Where `berth login` sends a person (RFC 8628's verification_uri): short enough to type, it takes the
 * browser to the console's approval page, with the code when the link carries one.
 */
export const DEVICE_PATH = '/device';

/**
 * The web console at `/`: static files built from `console/`, and nothing else — it calls the public
 * /v1 API with the user's token like any client. A checkout whose console was not built gets a page
 * that says how to build it, rather than a bare 404.
 */
export function consoleBuilt(dist = CONSOLE_DIST): boolean {
  return fs.existsSync(`${dist}/index.html`);
}

/** What to do about a console that was not built (a production install has no Vite). */
export const CONSOLE_NOT_BUILT =
  'run `npm run build:console` (an install with dev dependencies does it), then restart berth serve';

export async function registerConsole(app: FastifyInstance, dist = CONSOLE_DIST): Promise<void> {
  app.get(DEVICE_PATH, { schema: { hide: true } }, async (request, reply) => {
    const code = (request.query as Record<string, unknown>).user_code;
    // Only what a user code may hold is carried into the console's address.
    const carried = typeof code === 'string' && /^[A-Za-z-]{1,20}$/.test(code) ? `?user_code=${code}` : '';
    return reply.redirect(`/#/device${carried}`);
  });
  if (!consoleBuilt(dist)) {
    app.get('/', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send(`The Berth console is not built: ${CONSOLE_NOT_BUILT}.\n`),
    );
    return;
  }
  const options = {
    dotfiles: 'ignore',
    cacheControl: false,
    setHeaders: (reply: { header(name: string, value: string): unknown }, file: string) => {
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
      if (file.endsWith('.html')) {
        reply.header('content-security-policy', CONSOLE_CSP);
        reply.header('cache-control', 'no-cache');
      } else {
        // Vite names every asset by its content's hash.
        reply.header('cache-control', 'public, max-age=31536000, immutable');
      }
    },
  } as const;
  await app.register(fastifyStatic, {
    ...options,
    root: dist,
    prefix: '/',
    // One route per built file, registered now: no catch-all that could shadow an unknown /v1 path's 404.
    wildcard: false,
  });
  // The page is read at each request, so a console rebuilt under a running server (npm install, npm run
  // build:console) names assets that were not there at start: found under /assets/ only, which is no API's.
  await app.register(fastifyStatic, {
    ...options,
    root: `${dist}/assets`,
    prefix: '/assets/',
    wildcard: true,
    decorateReply: false,
  });
  // A real path, not the console's #/ routes: a provider's redirect URI may not carry a fragment. The page
  // reads the provider's answer from its query and hands it to POST /auth/sso/callback.
  app.get(SSO_CALLBACK_ROUTE, { schema: { hide: true } }, (_request, reply) => reply.sendFile('index.html'));
}

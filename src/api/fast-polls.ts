/**
 * Kept polls answered ahead of Fastify's router. A poll of a cached read (read-cache.ts) whose every
 * decision can be taken from memory, and would come out the usual way, is answered here: its token in
 * the token cache and allowed on the route, a place at hand in its rate-limit window, its representation
 * kept. The answer is the one the usual path writes, header for header (x-request-id, RateLimit-*, ETag,
 * Content-Type, Content-Length, in that order; 304 on a current If-None-Match), with the same access
 * line, HTTP metrics and token use noted. Anything else (another route or method, a cookie session, a
 * held read, a body, a miss, a window that needs a write or is full, an address being refused for
 * failed authentications, a closing server) goes to Fastify untouched, before anything is counted.
 *
 * Why: a kept poll costs node:http's work plus Fastify's routing, request and reply objects and hook
 * runner, about twice node:http's CPU; here it costs node:http's plus a few lookups
 * (docs/performance.md, "Polls ahead of the router").
 * @module
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { type Role, roleAtLeast } from '../domain/roles.ts';
import type { HttpRecord } from '../metrics/http.ts';
import { noneMatch } from './etag.ts';
import { logAccess } from './plugins/access-log.ts';
import type { AuthContext, TokenAuthenticator } from './plugins/auth.ts';
import type { AuthFailureLimit } from './plugins/auth-failures.ts';
import type { TokenRateLimit } from './plugins/rate-limit.ts';
import { requestIdFor } from './plugins/request-id.ts';
import { type ReadCache, readKeys } from './read-cache.ts';

/** A cached route this path answers, as its route file defines it. */
interface FastRoute {
  /** The route's template as Fastify names it (the metrics' route label). */
  url: string;
  /** Its read cache key (read-cache.ts's readKeys, as the route's handler uses them). */
  key(accountId: string, ids: string[]): string;
  /** The first path id is an environment: a token narrowed to some environments may read it there. */
  byEnvironment: boolean;
  /** A feature the plan must include (the route's own onRequest hook checks it). */
  feature?: string;
}

const DEPLOYMENT: FastRoute = {
  url: '/v1/deployments/:deploymentId',
  key: (accountId, [deploymentId]) => readKeys.deployment(accountId, deploymentId as string),
  // A narrowed token must first learn the deployment's environment: a query, left to the usual path.
  byEnvironment: false,
};
const SERVICE: FastRoute = {
  url: '/v1/environments/:envId/services/:serviceId',
  key: (accountId, [envId, serviceId]) => readKeys.service(accountId, envId as string, serviceId as string),
  byEnvironment: true,
};
const CUSTOM_DOMAINS: FastRoute = {
  url: '/v1/environments/:envId/services/:serviceId/custom-domains',
  key: (accountId, [envId, serviceId]) =>
    readKeys.customDomains(accountId, envId as string, serviceId as string),
  byEnvironment: true,
  feature: 'custom_domains',
};

const UUID = '([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})';
// Only the plain form of each path (no query, no encoding, no trailing slash): any other spelling goes
// to the router, which may read it differently.
const DEPLOYMENT_PATH = new RegExp(`^/v1/deployments/${UUID}$`);
const SERVICE_PATH = new RegExp(`^/v1/environments/${UUID}/services/${UUID}(/custom-domains)?$`);

/** The route's own schema bound on If-None-Match (conditional-reads.ts): longer ones are refused there. */
const MAX_IF_NONE_MATCH = 8192;
const JSON_TYPE = 'application/json; charset=utf-8';

export interface FastPollsOptions {
  reads: ReadCache;
  authenticator: TokenAuthenticator;
  rateLimit: TokenRateLimit;
  authFailures: AuthFailureLimit;
  logger: Logger;
  /** Behind trusted proxies the client address is read from X-Forwarded-For: left to Fastify. */
  trustProxy: boolean;
  /** The HTTP metrics, when collected. */
  record: HttpRecord | undefined;
}

/**
 * What a connection's last answered poll worked out from its path and Authorization header alone. A
 * poller sends the same two on its connection again and again: the next poll that sends them skips the
 * path's match, and looks the token and the read cache up with these strings, whose hashes V8 has
 * already computed (each poll's own header and key are new strings, hashed at every lookup). Nothing
 * here is a decision: the token, the read cache and the window are asked again on every poll.
 */
interface Recent {
  url: string;
  authorization: string;
  route: FastRoute;
  ids: string[];
  /** The read cache key: a token belongs to one account. */
  key: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** This app's fast path for kept polls (the tests and the benchmark look at it). */
    fastPolls: FastPolls;
  }
}

export class FastPolls {
  /** How many requests this path answered (the tests and the benchmark read it). */
  answered = 0;
  /** Off: every request goes to Fastify (the tests compare both paths on one app). */
  enabled = true;
  /** Fastify answers 503 once it is closing: from then on everything goes to it. */
  private closing = false;
  /** The role each cached route declares, as it was registered (absent: not answered here). */
  private readonly roles = new Map<string, Role>();
  private readonly recent = new WeakMap<Socket, Recent>();
  /** Told of every request the server receives, before anything else (the idle collector's touch). */
  private readonly everyRequest: (() => void)[] = [];
  private readonly options: FastPollsOptions;

  constructor(options: FastPollsOptions) {
    this.options = options;
  }

  /** Told of each /v1 route as it is registered: the cached GETs are answered with their own role. */
  registered(route: {
    method: string | string[];
    url: string;
    config?: { role?: Role; readCache?: boolean };
  }) {
    if (route.method === 'GET' && route.config?.readCache === true && route.config.role) {
      this.roles.set(route.url, route.config.role);
    }
  }

  /** Puts this path ahead of Fastify's handler on `server`. */
  install(server: Server): void {
    const [usual] = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
    if (!usual) throw new Error('the HTTP server has no request handler to put fast polls ahead of');
    server.removeListener('request', usual);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      for (const told of this.everyRequest) told();
      if (!this.answer(req, res)) usual(req, res);
    });
  }

  /**
   * Calls `told` on every request the server receives. The server keeps a single `request` listener:
   * with two, Node copies its listener list for each request it emits.
   */
  onEveryRequest(told: () => void): void {
    this.everyRequest.push(told);
  }

  close(): void {
    this.closing = true;
  }

  /** Answers `req` when it is a kept poll: true when it did (nothing counted or written otherwise). */
  answer(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.enabled || this.closing || req.method !== 'GET') return false;
    const url = req.url as string;
    const { headers, socket } = req;
    let { authorization } = headers;
    let route: FastRoute;
    let ids: string[];
    const last = this.recent.get(socket);
    const again = last !== undefined && last.url === url && last.authorization === authorization;
    if (again) {
      route = last.route;
      ids = last.ids;
      authorization = last.authorization;
    } else {
      const deployment = DEPLOYMENT_PATH.exec(url);
      if (deployment) {
        route = DEPLOYMENT;
        ids = [deployment[1] as string];
      } else {
        const service = SERVICE_PATH.exec(url);
        if (!service) return false;
        route = service[3] === undefined ? SERVICE : CUSTOM_DOMAINS;
        ids = [service[1] as string, service[2] as string];
      }
    }
    const role = this.roles.get(route.url);
    const seen = headers['if-none-match'];
    if (
      role === undefined ||
      authorization === undefined ||
      req.httpVersionMajor !== 1 ||
      req.httpVersionMinor !== 1 ||
      headers.host === undefined ||
      // A session cookie (or any cookie: the usual path decides), a held read, a body, a version.
      headers.cookie !== undefined ||
      headers.prefer !== undefined ||
      headers['content-type'] !== undefined ||
      headers['content-length'] !== undefined ||
      headers['transfer-encoding'] !== undefined ||
      headers['accept-version'] !== undefined ||
      (seen !== undefined && seen.length > MAX_IF_NONE_MATCH)
    ) {
      return false;
    }
    const { reads, authenticator, rateLimit, authFailures, logger, record } = this.options;
    const logs = logger.isLevelEnabled('info');
    if ((logs && this.options.trustProxy) || authFailures.refusingAny()) return false;
    // One clock reading for the request's decisions (in optimized code each is a call into V8's runtime).
    const now = Date.now();
    const auth = authenticator.cached(authorization, now);
    if (!auth || !allowed(auth, role, route, ids)) return false;
    const key = again ? last.key : route.key(auth.accountId, ids);
    const entry = reads.kept(key, now);
    if (!entry) return false;
    const limit = rateLimit.countAtHand(auth.tokenId, now);
    if (!limit) return false;
    // Decided: from here on it is answered as the usual path would.
    const started = logs || record ? performance.now() : 0;
    authenticator.used(auth, now);
    this.answered++;
    if (!again) this.recent.set(socket, { url, authorization, route, ids, key });
    const id = requestIdFor(req);
    // The fields as a flat list: node:http stores them without listing an object's keys.
    const fields: (string | number)[] = [
      'x-request-id',
      id,
      'ratelimit-limit',
      limit.limit,
      'ratelimit-remaining',
      limit.remaining,
      'ratelimit-reset',
      limit.resetS,
      'etag',
      entry.etag,
    ];
    if (noneMatch(seen, entry.etag)) {
      fields.push('content-type', JSON_TYPE, 'content-length', entry.bytes);
      res.writeHead(200, fields);
      res.end(entry.body);
    } else {
      res.writeHead(304, fields);
      res.end();
    }
    if (logs || record) {
      // When the last byte is handed over, as Fastify's log controller is told.
      res.once('finish', () => {
        const ms = performance.now() - started;
        if (logs) {
          const client = req.socket.remoteAddress ?? 'unknown';
          logAccess(logger.child({ reqId: id }), 'GET', url, client, res.statusCode, ms);
        }
        record?.(route.url, 'GET', res.statusCode, ms / 1000);
      });
    }
    return true;
  }
}

/** roles.ts's authorize() and the route's own checks, for a read that needs nothing loaded first. */
function allowed(auth: AuthContext, role: Role, route: FastRoute, ids: string[]): boolean {
  if (!roleAtLeast(auth.role, role)) return false;
  if (route.feature !== undefined && !auth.features.has(route.feature)) return false;
  return auth.environments === null || (route.byEnvironment && auth.environments.has(ids[0] as string));
}

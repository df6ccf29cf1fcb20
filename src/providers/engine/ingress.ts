/**
 * The docker provider's ingress: an HTTP reverse proxy (Fastify, and undici to the replicas: proxy.ts) on
 * BERTH_INGRESS_PORT that routes by Host — `{subdomain}.{ingress host}` or an active custom domain — to
 * the replicas of the deployment that serves a web service (where a driver's `targets` says), round robin. It honours the ops.json that
 * deployment runs with: ip_whitelist (403), request_body_size (413), read/send timeouts (504) and
 * connection_timeout (the time to connect to a container).
 *
 * Given a CertificateSource (ACME on), it also serves HTTPS on its HTTPS port, choosing each name's
 * certificate by SNI (a custom domain's own, else the ingress domain's wildcard); over HTTP it answers
 * ACME HTTP-01 challenges, over HTTPS TLS-ALPN-01 ones, and redirects a name that has a certificate to
 * HTTPS unless its service opted out (ingress.https_redirect); HTTPS answers carry HSTS when the service
 * opted in (ingress.hsts_max_age). A name without a certificate keeps being served over HTTP.
 * @module
 */
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { Transform } from 'node:stream';
import tls from 'node:tls';
import Fastify, { type FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { Agent, buildConnector } from 'undici';
import { DEFAULT_OPS_CONFIG, type OpsConfig } from '../../domain/ops-json.ts';
import type { CertificateSource } from '../provider.ts';
import { ACME_TLS, type AlpnResponder, startAlpnResponder } from './alpn-responder.ts';
import { type NativePlane, type NativeRoute, startHaproxy } from './haproxy.ts';
import { BodyOverLimit, proxy } from './proxy.ts';
import type { IngressProxy } from './settings.ts';
import type { DockerDb } from './tables.ts';
import type { Traffic } from './traffic.ts';

export interface Ingress {
  url: string;
  /** The HTTPS listener's URL, when it serves HTTPS. */
  httpsUrl: string | null;
  /**
   * Forgets every host's upstreams: the routing table changed, and the next request reads it again. The
   * process that moved traffic calls it, so its own ingress switches at once; another process's ingress
   * follows within INGRESS_CACHE_MS.
   */
  forget(): void;
  close(): Promise<void>;
}

interface Upstream {
  serviceId: string;
  targets: string[];
  ops: OpsConfig;
}

/** How long a host's upstreams are remembered; a rollout waits longer than this before stopping old containers. */
export const INGRESS_CACHE_MS = 1000;
const CACHE_ENTRIES = 10_000;
/** How long HAProxy's copy of a route's replicas stands while its deployment stays the same. */
const NATIVE_TARGETS_MS = 5000;

/** A routed web service, as the ingress looks up where it runs. */
export interface RouteTarget {
  serviceId: string;
  deploymentId: string;
  environmentId: string;
  port: number;
}

export async function startIngress(options: {
  db: DockerDb;
  /** Where a routed web service's replicas answer now, as `host:port`. */
  targets: (route: RouteTarget) => Promise<string[]>;
  logger: Logger;
  host: string;
  port: number;
  ingressHost: string;
  /** Where each answer for a routed service is counted (its metrics). */
  traffic: Traffic;
  /**
   * With ACME on: where certificates and challenge answers come from, and the HTTPS port. `proxy`
   * (BERTH_INGRESS_PROXY) `haproxy` serves HTTPS from HAProxy (haproxy.ts) rather than from this process.
   */
  tls?: {
    certificates: CertificateSource;
    port: number;
    proxy?: IngressProxy;
    /** TLS-ALPN-01 validations come to the HTTPS port (BERTH_ACME_CHALLENGE=tls-alpn-01). */
    alpnChallenges?: boolean;
  };
}): Promise<Ingress> {
  const { db, ingressHost } = options;
  const suffix = `.${ingressHost.toLowerCase()}`;
  const cache = new Map<string, { at: number; upstream: Upstream | null }>();
  const connectTimeouts = new Map<string, number>();
  let turn = 0;

  const connectors = new Map<number, buildConnector.connector>();
  const connectorFor = (timeout: number) => {
    let connector = connectors.get(timeout);
    if (!connector) {
      connector = buildConnector({ timeout });
      connectors.set(timeout, connector);
    }
    return connector;
  };
  // Each container's own connection_timeout, chosen when the connection is made.
  const agent = new Agent({
    connect: (opts, callback) =>
      connectorFor(
        connectTimeouts.get(`${opts.hostname}:${opts.port}`) ??
          DEFAULT_OPS_CONFIG.ingress.connection_timeout * 1000,
      )(opts, callback),
  });

  // Only the routing table the driver writes at apply time: the service's subdomain and active domains.
  async function resolve(host: string): Promise<Upstream | null> {
    const query = db
      .selectFrom('docker_routes')
      .select(['service_id', 'deployment_id', 'environment_id', 'type', 'port', 'ops']);
    const route = host.endsWith(suffix)
      ? await query.where('subdomain', '=', host.slice(0, -suffix.length)).executeTakeFirst()
      : await query.where(sql<boolean>`domains @> ${JSON.stringify([host])}::jsonb`).executeTakeFirst();
    if (route?.type !== 'web' || !route.environment_id) return null;
    if (!route.port) return { serviceId: route.service_id, targets: [], ops: route.ops };
    const { ops, port } = route;
    const addresses = await options.targets({
      serviceId: route.service_id,
      deploymentId: route.deployment_id,
      environmentId: route.environment_id,
      port,
    });
    const targets = addresses.map((address) => {
      connectTimeouts.set(address, ops.ingress.connection_timeout * 1000);
      return `http://${address}`;
    });
    return { serviceId: route.service_id, targets, ops };
  }

  async function upstreamFor(hostHeader: string): Promise<Upstream | null> {
    const host = hostOf(hostHeader);
    const hit = cache.get(host);
    if (hit && Date.now() - hit.at < INGRESS_CACHE_MS) return hit.upstream;
    const upstream = await resolve(host);
    // Hosts are whatever clients send: the cache is bounded, not a map anyone can grow.
    if (cache.size >= CACHE_ENTRIES) cache.clear();
    cache.set(host, { at: Date.now(), upstream });
    return upstream;
  }

  const allowed = (ip: string, whitelist: string[]) => {
    if (whitelist.length === 0) return true;
    const address = ipaddr.process(ip);
    return whitelist.some((entry) => {
      const [range, bits] = entry.includes('/')
        ? ipaddr.parseCIDR(entry)
        : [ipaddr.parse(entry), entry.includes(':') ? 128 : 32];
      return address.kind() === range.kind() && address.match(range, bits);
    });
  };

  const certificates = options.tls ? certificateCache(options.tls.certificates, options.logger) : null;

  // Uploads may be large (request_body_size reaches 1 GB) but not endless: an hour to send one.
  const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 * 1024, requestTimeout: 3_600_000 });
  // Each admitted request's upstream, from onRequest to the handler; gone with the request.
  const upstreams = new WeakMap<FastifyRequest, Upstream>();
  // The service each request is for (refused ones too: a 403 or a 503 is an answer its users saw).
  const servedFor = new WeakMap<FastifyRequest, Upstream>();
  const upstreamOf = (request: FastifyRequest) => {
    const upstream = upstreams.get(request);
    if (!upstream) throw new Error('a request reached the proxy without an upstream');
    return upstream;
  };

  // Resolved before the body is read, so refusals cost no upload.
  app.addHook('onRequest', async (request, reply) => {
    const secure = isEncrypted(request);
    if (options.tls && certificates && !secure) {
      if (request.url.startsWith(CHALLENGE_PATH)) {
        const token = request.url.slice(CHALLENGE_PATH.length);
        const answer = /^[\w-]+$/.test(token) ? await options.tls.certificates.httpChallenge(token) : null;
        return answer === null
          ? reply.code(404).type('text/plain').send('no such challenge\n')
          : reply.code(200).type('text/plain').send(answer);
      }
    }
    const upstream = await upstreamFor(request.headers.host ?? '');
    // A name with a certificate is redirected unless its service opted out (ops.json's
    // ingress.https_redirect: false); a route stored before that field existed lacks it and redirects.
    if (options.tls && certificates && !secure && upstream?.ops.ingress.https_redirect !== false) {
      const name = hostOf(request.headers.host ?? '');
      if (name && (await certificates.context(name))) {
        const port = options.tls.port === 443 ? '' : `:${options.tls.port}`;
        return reply.redirect(`https://${name}${port}${request.url}`, 308);
      }
    }
    const refuse = (code: number, message: string) =>
      reply.code(code).type('text/plain').send(`${message}\n`);
    if (!upstream) return refuse(404, `no service at ${request.headers.host ?? '(no Host header)'}`);
    servedFor.set(request, upstream);
    const { ingress, ip_whitelist: whitelist } = upstream.ops;
    if (!allowed(request.ip, whitelist)) return refuse(403, 'your address may not reach this service');
    if (Number(request.headers['content-length'] ?? 0) > ingress.request_body_size * 1024 * 1024) {
      return refuse(413, `request bodies are limited to ${ingress.request_body_size} MB`);
    }
    if (upstream.targets.length === 0) return refuse(503, 'the service has no running replicas');
    upstreams.set(request, upstream);
  });

  app.addHook('onResponse', (request, reply, done) => {
    const upstream = servedFor.get(request);
    if (upstream) options.traffic.record(upstream.serviceId, reply.statusCode, reply.elapsedTime);
    done();
  });
  // HSTS only where the service opted in (ops.json's ingress.hsts_max_age): it binds browsers to HTTPS
  // for the name long after, which a service that still needs plain HTTP must not be forced into.
  // Only over HTTPS, as RFC 6797 asks; null (or absent, in a route stored before the field) sends none.
  if (options.tls) {
    app.addHook('onSend', async (request, reply) => {
      const maxAge = servedFor.get(request)?.ops.ingress.hsts_max_age;
      if (isEncrypted(request) && typeof maxAge === 'number') {
        reply.header('strict-transport-security', `max-age=${maxAge}`);
      }
    });
  }

  // Bodies stream through untouched, cut off at the service's limit when no Content-Length announced them.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const limitMb = upstreamOf(request).ops.ingress.request_body_size;
    let seen = 0;
    const limited = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        seen += chunk.length;
        callback(seen > limitMb * 1024 * 1024 ? new BodyOverLimit(limitMb) : null, chunk);
      },
    });
    payload.on('error', (error) => limited.destroy(error));
    done(null, payload.pipe(limited));
  });

  app.all('/*', async (request, reply) => {
    const { targets, ops } = upstreamOf(request);
    return proxy(agent, request, reply, {
      origin: targets[turn++ % targets.length] as string,
      readTimeoutMs: ops.ingress.read_timeout * 1000,
      sendTimeoutMs: ops.ingress.send_timeout * 1000,
      secure: isEncrypted(request),
    });
  });

  /**
   * Every routed web service with its host names and replicas, and each name's certificate: what
   * HAProxy serves, which (unlike the lookups above, made per request) it must be given in full.
   */
  // Each route's replicas as last asked of the engine: asked again when its deployment changes, else
  // every NATIVE_TARGETS_MS (a replica restarted in place), not every second for every service.
  const nativeTargets = new Map<string, { deploymentId: string; at: number; targets: string[] }>();
  async function nativeTable() {
    const source = options.tls?.certificates;
    const rows = await db
      .selectFrom('docker_routes')
      .select(['service_id', 'deployment_id', 'environment_id', 'port', 'ops', 'subdomain', 'domains'])
      .where('type', '=', 'web')
      .execute();
    const routes: NativeRoute[] = [];
    const served = new Map<string, { cert: string; key: string }>();
    for (const row of rows) {
      if (!row.environment_id) continue;
      const hosts = [...(row.subdomain ? [`${row.subdomain}${suffix}`] : []), ...row.domains];
      const known = nativeTargets.get(row.service_id);
      let targets = known?.targets ?? [];
      if (known?.deploymentId !== row.deployment_id || Date.now() - known.at >= NATIVE_TARGETS_MS) {
        targets = row.port
          ? await options.targets({
              serviceId: row.service_id,
              deploymentId: row.deployment_id,
              environmentId: row.environment_id,
              port: row.port,
            })
          : [];
        nativeTargets.set(row.service_id, { deploymentId: row.deployment_id, at: Date.now(), targets });
      }
      routes.push({ serviceId: row.service_id, hosts, targets, ops: row.ops });
      for (const host of hosts) {
        const pair = await source?.certificate(host);
        if (pair) served.set(host, pair);
      }
    }
    const routed = new Set(rows.map((row) => row.service_id));
    for (const serviceId of nativeTargets.keys()) if (!routed.has(serviceId)) nativeTargets.delete(serviceId);
    return { routes, certificates: served };
  }

  const url = await app.listen({ host: options.host, port: options.port });
  let https: HttpsServer | null = null;
  let native: NativePlane | null = null;
  let httpsUrl: string | null = null;
  let responder: AlpnResponder | null = null;
  if (options.tls?.proxy === 'haproxy') {
    try {
      // HAProxy presents each name's own certificate: the CA's handshakes are passed to Berth instead.
      if (options.tls.alpnChallenges) responder = await startAlpnResponder(options.tls.certificates);
      native = await startHaproxy({
        alpnResponder: responder?.address,
        bind: options.host,
        port: options.tls.port,
        load: nativeTable,
        logger: options.logger,
        intervalMs: INGRESS_CACHE_MS,
        counted: (serviceId, status, ms) => options.traffic.record(serviceId, status, ms),
      });
    } catch (err) {
      await responder?.close();
      await app.close();
      await agent.close();
      throw err;
    }
    httpsUrl = native.url;
  } else if (options.tls && certificates) {
    // The CA's TLS-ALPN-01 handshakes (RFC 8737) offer `acme-tls/1` alone; they get the challenge's
    // certificate, everyone else the name's own. Node calls ALPNCallback before SNICallback, both on
    // the handshake's socket (`this`): that is how the second knows what the first saw.
    const challengeHandshakes = new WeakSet<tls.TLSSocket>();
    const source = options.tls.certificates;
    https = createHttpsServer(
      {
        ALPNCallback(this: tls.TLSSocket, { protocols }) {
          if (protocols.includes(ACME_TLS)) {
            challengeHandshakes.add(this);
            return ACME_TLS;
          }
          // A client that offers protocols but not HTTP/1.1 (h2 alone) could not talk to this server.
          return protocols.includes('http/1.1') ? 'http/1.1' : undefined;
        },
        // A name without a certificate has no context: its handshake fails, as it would at any host.
        SNICallback(this: tls.TLSSocket, servername, callback) {
          const name = servername.toLowerCase();
          const context = challengeHandshakes.has(this)
            ? source.alpnChallenge(name).then((pair) => (pair ? tls.createSecureContext(pair) : null))
            : certificates.context(name);
          context.then(
            (found) => callback(null, found ?? undefined),
            (error: Error) => callback(error),
          );
        },
        requestTimeout: 3_600_000,
      },
      (req, res) => app.routing(req, res),
    );
    // A TLS-ALPN-01 validation is the handshake alone: nothing is served on it.
    https.on('secureConnection', (socket: tls.TLSSocket) => {
      if (socket.alpnProtocol === ACME_TLS) socket.end();
    });
    const server = https;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.tls?.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address() as { port: number };
    httpsUrl = `https://${options.host.includes(':') ? `[${options.host}]` : options.host}:${address.port}`;
  }
  options.logger.info({ url, httpsUrl, ingressHost }, 'ingress listening');
  return {
    url,
    httpsUrl,
    forget: () => {
      cache.clear();
      void native?.sync();
    },
    close: async () => {
      await native?.close();
      await responder?.close();
      if (https) {
        const server = https;
        const closed = new Promise((resolve) => server.close(resolve));
        server.closeAllConnections();
        await closed;
      }
      await app.close();
      await agent.close();
    },
  };
}

const CHALLENGE_PATH = '/.well-known/acme-challenge/';

const isEncrypted = (request: { raw: { socket: unknown } }) =>
  (request.raw.socket as tls.TLSSocket).encrypted === true;

function hostOf(hostHeader: string): string {
  return hostHeader.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
}

/**
 * Each name's TLS context, read again from the source every INGRESS_CACHE_MS (a renewed certificate
 * serves within about that), made again only when the certificate changed. Bounded like the routes.
 */
function certificateCache(source: CertificateSource, logger: Logger) {
  const entries = new Map<string, { at: number; cert: string | null; context: tls.SecureContext | null }>();
  const pending = new Map<string, Promise<tls.SecureContext | null>>();
  const load = async (name: string) => {
    const served = await source.certificate(name);
    const previous = entries.get(name);
    let context: tls.SecureContext | null = null;
    if (served && previous?.cert === served.cert) context = previous.context;
    else if (served) {
      try {
        context = tls.createSecureContext({ cert: served.cert, key: served.key });
      } catch (err) {
        logger.warn({ err, name }, 'a stored certificate cannot serve TLS');
      }
    }
    if (entries.size >= CACHE_ENTRIES) entries.clear();
    entries.set(name, { at: Date.now(), cert: served?.cert ?? null, context });
    return context;
  };
  return {
    context: (name: string): Promise<tls.SecureContext | null> => {
      const hit = entries.get(name);
      if (hit && Date.now() - hit.at < INGRESS_CACHE_MS) return Promise.resolve(hit.context);
      let loading = pending.get(name);
      if (!loading) {
        // One read per name at a time, however many handshakes ask.
        loading = load(name).finally(() => pending.delete(name));
        pending.set(name, loading);
      }
      return loading;
    },
  };
}

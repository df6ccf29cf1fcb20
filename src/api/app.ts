import type http from 'node:http';
import type https from 'node:https';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyReply,
} from 'fastify';
import { ForbiddenError, UnauthorizedError } from '../domain/errors.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { httpMetricsObserver, httpMetricsRecord } from '../metrics/http.ts';
import { registerConsole } from './console.ts';
import { FastPolls } from './fast-polls.ts';
import { andThen, hookOf, parsingHookOf } from './hooks.ts';
import { BODY_LIMIT_BYTES, registerJsonBody } from './json-body.ts';
import { smtpMailer } from './mailer.ts';
import { OpenStreams } from './open-streams.ts';
import { ResponseFinished } from './plugins/access-log.ts';
import { type AuthContext, authOf, TokenAuthenticator } from './plugins/auth.ts';
import { authFailureLimit } from './plugins/auth-failures.ts';
import { registerBodyGuards } from './plugins/body-guards.ts';
import { answeredMissingHost, clientErrorHandler, registerClientErrors } from './plugins/client-errors.ts';
import { registerConditionalReads } from './plugins/conditional-reads.ts';
import { registerErrorHandling } from './plugins/errors.ts';
import { registerIdempotency } from './plugins/idempotency.ts';
import { tokenRateLimit } from './plugins/rate-limit.ts';
import { requestIdFor } from './plugins/request-id.ts';
import { authorize, checkDeclaredRole, confine } from './plugins/roles.ts';
import { checkPathIds, loadScope } from './plugins/scope.ts';
import { authenticateSession, checkCsrf, SESSION_CREDENTIAL, sessionSecret } from './plugins/sessions.ts';
import { ReadCache } from './read-cache.ts';
import { requestLoggers } from './request-logger.ts';
import { adminRoutes } from './routes/admin.ts';
import { alertRoutes } from './routes/alerts.ts';
import { auditRoutes } from './routes/audit.ts';
import { comingSoonRoutes } from './routes/coming-soon.ts';
import { customDomainRoutes } from './routes/custom-domains.ts';
import { dependencyRoutes } from './routes/dependencies.ts';
import { dependencyBackupRoutes } from './routes/dependency-backups.ts';
import { deployControlRoutes } from './routes/deploy-controls.ts';
import { deploymentLogRoutes } from './routes/deployment-logs.ts';
import { deploymentRoutes } from './routes/deployments.ts';
import { deviceAuthRoutes, deviceLoginRoutes } from './routes/device-logins.ts';
import { environmentRoutes } from './routes/environments.ts';
import { eventRoutes } from './routes/events.ts';
import { healthRoutes } from './routes/health.ts';
import { hookRoutes } from './routes/hooks.ts';
import { logRoutes } from './routes/logs.ts';
import { passkeyRoutes, passkeySignInRoutes } from './routes/passkeys.ts';
import { secretRoutes } from './routes/secrets.ts';
import { serviceMetricsRoutes } from './routes/service-metrics.ts';
import { serviceRoutes } from './routes/services.ts';
import { sessionRoutes, signInRoutes } from './routes/sessions.ts';
import { ssoRoutes, ssoSignInRoutes } from './routes/single-sign-on.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { ErrorBody } from './schemas/common.ts';
import type { TlsPair } from './tls-files.ts';
import { lazySerializers, validatorCompiler } from './validation.ts';

export type App = FastifyInstance;

export interface AppOptions {
  /** Bearer token of /admin/v1. */
  adminToken: string;
  /** Sees every route as it is registered (the tests list the routes with it). */
  onRoute?: (route: {
    method: string | string[];
    url: string;
    config?: { role?: string; wholeAccount?: boolean };
  }) => void;
  /** Whether this process's worker loop runs, for /ready; absent: no workers run in this process. */
  workerAlive?: () => boolean;
  /**
   * Serve HTTPS with this certificate and key (tls-files.ts reads and checks them), or with what an
   * SNICallback picks (the ACME certificate of BERTH_TLS_ACME_NAME); absent: HTTP.
   */
  tls?: TlsPair | Pick<https.ServerOptions, 'SNICallback'> | undefined;
}

/** Node's default: what an HTTP/1.1 client may send as request line and headers together. */
const MAX_HEADER_BYTES = 16 * 1024;

/** The HTTP application, without listening: the process entry, the tests and the benchmark build the same one. */
export async function buildApp(deps: Deps, options: AppOptions) {
  const { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs } = deps.config;
  const httpMetrics = deps.config.metricsBind ? httpMetricsRecord(deps.metrics) : undefined;
  const server = {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    maxHeaderSize: MAX_HEADER_BYTES,
    // A missing Host is answered in the error shape (client-errors.ts), not with Node's empty 400.
    requireHostHeader: false,
    // Node checks the two timeouts only this often (30 s by default): check often enough that a
    // connection is closed close to its bound.
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(headersTimeoutMs / 4))),
  };
  // Typed as Fastify's HTTP options plus `https`: an https.Server is an http.Server to everything here,
  // while the overload that takes `https` would type the whole app differently.
  const fastifyOptions: FastifyHttpOptions<http.Server> & { https: https.ServerOptions | null } = {
    loggerInstance: deps.logger as FastifyBaseLogger,
    genReqId: requestIdFor,
    requestIdHeader: false,
    // Metrics, when served, are taken there too: the cheapest place a finished request is seen.
    logController: new ResponseFinished(httpMetrics && httpMetricsObserver(httpMetrics)),
    childLoggerFactory: requestLoggers,
    // Forwarded headers are believed only from these proxies (client-address.ts); none: never.
    trustProxy: deps.config.trustProxy.length > 0 ? deps.config.trustProxy : false,
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    // HTTP/1.1 over TLS too: Fastify's HTTP/2 hands routes another request type than the hooks read.
    // Null: plain HTTP with `http`'s settings (an HTTPS server takes the same ones from here).
    https: options.tls ? { ...server, ...options.tls } : null,
    http: server,
    // Malformed HTTP and late requests, answered in the spec's error shape (docs/api.md).
    clientErrorHandler: clientErrorHandler({ requestTimeoutMs, maxHeaderBytes: MAX_HEADER_BYTES }),
    ajv: { customOptions: { strict: false } },
    schemaController: { compilersFactory: { buildSerializer: lazySerializers } },
    // Ids are UUIDs; anything much longer cannot name a resource (answered 404 below).
    routerOptions: { maxParamLength: 200 },
    // A path the router cannot even read (bad percent-encoding, an overlong id) names nothing: 404.
    frameworkErrors: (_error, request, reply) => {
      (reply as FastifyReply)
        .code(404)
        .header('x-request-id', request.id)
        .send({ error_code: 'notfound', message: 'Route not found', errors: null });
    },
  };
  const app = Fastify(fastifyOptions).withTypeProvider<TypeBoxTypeProvider>();

  // The first preClose hook: Fastify runs it as it starts answering 503, so that fast polls stop then.
  let fastPolls: FastPolls | undefined;
  app.addHook('preClose', async () => fastPolls?.close());
  if (options.onRoute) app.addHook('onRoute', options.onRoute);
  // First, so that every answer carries it, those of the hooks after it included. Set here rather than
  // in an onSend hook: a route without onSend hooks skips that phase. A callback hook: an async one costs
  // a promise per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (!answeredMissingHost(request, reply)) done();
  });
  app.setValidatorCompiler(validatorCompiler);
  app.addSchema(ErrorBody);
  registerErrorHandling(app);
  registerJsonBody(app);
  registerBodyGuards(app);
  registerClientErrors(app);
  registerConditionalReads(app);
  app.decorateRequest('auth', undefined);
  app.decorateRequest('scope', undefined as never);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Environment and Service Management API (Berth)',
        version: '1.0.0',
        description:
          'Served by Berth. docs/api.md explains the decisions behind every "not shown" of the spec.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'The account API token (a UUID)' },
        },
      },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    // Each operation names the role it needs (docs/access.md), as `x-berth-role`.
    transform: ({ schema, url, route }) => {
      const role = route.config?.role;
      return { schema: role && schema ? { ...schema, 'x-berth-role': role } : schema, url };
    },
  });

  await app.register(healthRoutes, { deps, workerAlive: options.workerAlive });

  const authenticator = new TokenAuthenticator(deps.store.db, (error) =>
    deps.logger.warn({ err: error }, 'could not note when tokens were last used'),
  );
  // The last `last_used_at` write finishes before the database closes.
  app.addHook('onClose', async () => authenticator.settle());
  const reads = new ReadCache(deps.store.notifications);
  app.decorate('readCache', reads);
  const unsubscribe = deps.store.notifications.subscribe('changes', reads);
  app.addHook('onClose', async () => unsubscribe());
  // Held reads end (304) when the server closes, rather than holding the close for up to a minute.
  app.addHook('preClose', async () => reads.release());
  // A stream ends when its token may no longer read, in every process; a closing server ends them all
  // rather than wait for their clients.
  // A bearer token, or else the session cookie: a request carrying both acts as the token.
  const authenticate = (authorization: string | undefined, secret: string | undefined) =>
    authorization || !secret
      ? authenticator.authenticate(authorization)
      : authenticateSession(deps.store.db, secret);
  const streams = new OpenStreams(
    { perToken: deps.config.streamsPerToken, perAccount: deps.config.streamsPerAccount },
    async (credential) => {
      try {
        return await (credential?.startsWith(SESSION_CREDENTIAL)
          ? authenticateSession(deps.store.db, credential.slice(SESSION_CREDENTIAL.length))
          : authenticator.authenticate(credential));
      } catch (error) {
        if (error instanceof UnauthorizedError || error instanceof ForbiddenError) return null;
        throw error;
      }
    },
  );
  app.decorate('openStreams', streams);
  const unsubscribeAccess = deps.store.notifications.subscribe('access', {
    notified: (keys) => {
      // Another process revoked or changed access: this one's token cache must not outlive it.
      authenticator.forget();
      streams.notified(keys);
    },
    up: () => {
      authenticator.forget();
      streams.up();
    },
  });
  app.addHook('onClose', async () => unsubscribeAccess());
  app.addHook('preClose', async () => streams.endAll());
  deps.metrics.openStreams = () => streams.size;
  const { metrics } = deps;
  const mailer = deps.config.smtpUrl
    ? smtpMailer(deps.config.smtpUrl, deps.config.mailFrom, deps.logger)
    : null;
  app.addHook('onClose', async () => mailer?.close());
  const authFailures = authFailureLimit(deps.config.authFailuresPerMin, {
    failed: () => metrics.authFailures.inc({ surface: 'api' }),
    refused: () => metrics.refusals.inc({ reason: 'auth_failures' }),
  });
  // With Postgres, other API processes may serve the same tokens: the window lives in the database.
  const rateLimit = tokenRateLimit(
    deps.config.rateLimitPerMin,
    deps.config.databaseUrl ? deps.store.db : undefined,
    () => metrics.refusals.inc({ reason: 'rate_limit' }),
  );
  fastPolls = new FastPolls({
    reads,
    authenticator,
    rateLimit,
    authFailures,
    logger: deps.logger,
    trustProxy: deps.config.trustProxy.length > 0,
    record: httpMetrics,
  });
  fastPolls.install(app.server);
  app.decorate('fastPolls', fastPolls);
  await app.register(
    async (v1) => {
      v1.addHook(
        'onRequest',
        hookOf((request, reply) =>
          andThen(
            authFailures.guard(request, reply, (): AuthContext | Promise<AuthContext> => {
              const { authorization } = request.headers;
              const secret = sessionSecret(request);
              const auth = authenticate(authorization, secret);
              if (authorization || !secret) return auth;
              return andThen(auth, (session) => {
                checkCsrf(request, secret);
                return session;
              });
            }),
            (auth) => {
              request.auth = auth;
              return andThen(rateLimit.count(reply, auth.tokenId), () => authorize(request, auth));
            },
          ),
        ),
      );
      // A cached read loads the path's resources itself, and only when the cache misses: it checks the
      // path's ids after its own onRequest hooks, and so passes no preParsing phase.
      v1.addHook('onRoute', (route) => {
        checkDeclaredRole(route);
        fastPolls.registered(route);
        if (route.config?.readCache === true) {
          const byDeployment = route.url.includes(':deploymentId');
          route.onRequest = [
            ...[route.onRequest ?? []].flat(),
            hookOf(checkPathIds),
            // Only a token narrowed to some environments must know, before the cache answers, which
            // environment a deployment belongs to.
            hookOf((request) => {
              const auth = authOf(request);
              if (auth.environments === null || !byDeployment) return;
              return loadScope(deps.store.db, request).then((scope) => confine(auth, scope));
            }),
          ];
          return;
        }
        route.preParsing = [
          parsingHookOf((request) =>
            loadScope(deps.store.db, request).then((scope) => {
              confine(authOf(request), scope);
              request.scope = scope;
            }),
          ),
          ...[route.preParsing ?? []].flat(),
        ];
      });
      registerIdempotency(v1, deps.store.db, deps.secretBox, (request) => authOf(request).accountId);
      await v1.register(environmentRoutes, { deps });
      await v1.register(serviceRoutes, { deps, reads });
      await v1.register(deploymentRoutes, { deps, reads });
      await v1.register(secretRoutes, { deps });
      await v1.register(dependencyRoutes, { deps });
      await v1.register(dependencyBackupRoutes, { deps });
      await v1.register(customDomainRoutes, { deps, reads });
      await v1.register(auditRoutes, { deps });
      await v1.register(logRoutes, { deps });
      await v1.register(serviceMetricsRoutes, { deps });
      await v1.register(alertRoutes, { deps });
      await v1.register(deploymentLogRoutes, { deps });
      await v1.register(deployControlRoutes, { deps });
      await v1.register(eventRoutes, { deps });
      await v1.register(webhookRoutes, { deps });
      await v1.register(tokenRoutes, { deps, authenticator });
      await v1.register(sessionRoutes, { deps, mailer });
      await v1.register(passkeyRoutes, { deps });
      await v1.register(deviceLoginRoutes, { deps });
      await v1.register(ssoRoutes, { deps });
      await v1.register(comingSoonRoutes);
    },
    { prefix: '/v1' },
  );
  // Webhook deliveries count apart: a host retrying with a wrong secret must not lock the API out.
  const hookFailures = authFailureLimit(deps.config.authFailuresPerMin, {
    failed: () => metrics.authFailures.inc({ surface: 'hooks' }),
    refused: () => metrics.refusals.inc({ reason: 'auth_failures' }),
  });
  await app.register(signInRoutes, {
    prefix: '/auth',
    deps,
    authFailures,
    authFailuresPerMin: deps.config.authFailuresPerMin,
  });
  await app.register(passkeySignInRoutes, { prefix: '/auth', deps, authFailures });
  await app.register(deviceAuthRoutes, { prefix: '/auth', deps });
  await app.register(ssoSignInRoutes, { prefix: '/auth', deps, authFailures });
  await app.register(hookRoutes, { prefix: '/hooks', deps, failures: hookFailures });
  await app.register(adminRoutes, {
    prefix: '/admin/v1',
    deps,
    adminToken: options.adminToken,
    authenticator,
    authFailures,
  });

  // Served without auth, from the very schemas that validate and serialize.
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await registerConsole(app);
  return app;
}

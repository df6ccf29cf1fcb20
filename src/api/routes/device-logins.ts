/**
 * `berth login` by the OAuth 2.0 Device Authorization Grant (RFC 8628, docs/access.md): the two
 * endpoints a client calls without a token (/auth/device/code, /auth/device/token), which answer as the
 * RFC says (its fields at the top level, errors as RFC 6749 §5.2's `{error, error_description}`), and
 * the /v1 routes the console's approval page calls as the signed-in person.
 * @module
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  ForbiddenError,
  NotFoundError,
  RateLimitedError,
  UNKNOWN_MESSAGE,
  ValidationError,
} from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import {
  decideDeviceLoginOf,
  pollDeviceLogin,
  startDeviceLogin,
  waitingDeviceLogin,
} from '../../domain/usecases/device-logins.ts';
import { clientAddress } from '../client-address.ts';
import { actorOf, authOf, callOf } from '../plugins/auth.ts';
import { toApiError } from '../plugins/errors.ts';
import { MemoryWindows } from '../plugins/windows.ts';
import { Envelope, errorResponses } from '../schemas/common.ts';
import {
  DeviceCode,
  DeviceCodeBody,
  DeviceLogin,
  DeviceLoginParams,
  DeviceToken,
  DeviceTokenBody,
  OAuthError,
} from '../schemas/device-logins.ts';
import { success } from '../views.ts';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** Device logins one address may start a minute: each is a row, and no one signed in asked for it. */
const STARTS_PER_MIN = 20;
/** Unknown user codes one session may try a minute: guessing someone's code stays hopeless. */
const MISSES_PER_MIN = 10;

const OAUTH_RESPONSES = { 400: OAuthError, 429: OAuthError, 500: OAuthError };

/** RFC 6749 §5.2's error answer. */
function oauthError(reply: FastifyReply, status: number, error: string, description: string) {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .send({ error, error_description: description });
}

/** The RFC sends form-encoded bodies: read them as JSON would be, each field once. */
function formBody(
  _request: FastifyRequest,
  body: string,
  done: (error: Error | null, body?: unknown) => void,
) {
  const fields: Record<string, string> = Object.create(null);
  for (const [key, value] of new URLSearchParams(body)) {
    if (Object.hasOwn(fields, key)) {
      return done(ValidationError.fields([{ field: key, error: `${key} must be given once` }]));
    }
    fields[key] = value;
  }
  done(null, fields);
}

export const deviceAuthRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (request, body, done) => formBody(request, body as string, done),
  );
  // Every refusal here is RFC 6749's shape, body errors and 500s included: an OAuth client reads `error`.
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = toApiError(error, request);
    if (!known || known.status >= 500) {
      request.log.error({ err: error }, 'unexpected error');
      return oauthError(reply, 500, 'server_error', UNKNOWN_MESSAGE);
    }
    if (known instanceof RateLimitedError) return oauthError(reply, 429, 'slow_down', known.message);
    const fields = known.errors?.map((e) => e.error).join('; ');
    return oauthError(reply, 400, 'invalid_request', fields ? `${known.message}: ${fields}` : known.message);
  });
  const starts = new MemoryWindows(60_000);

  app.post(
    '/device/code',
    {
      schema: {
        summary: 'Start a device login (RFC 8628 device authorization request): no token needed',
        description:
          'Answers the device code (the client keeps it secret and polls /auth/device/token with it) and the ' +
          'user code a signed-in person approves at verification_uri, within expires_in seconds. JSON or ' +
          'form-encoded. docs/access.md.',
        consumes: ['application/json', 'application/x-www-form-urlencoded'],
        body: DeviceCodeBody,
        response: { 200: DeviceCode, ...OAUTH_RESPONSES },
      },
    },
    async (request, reply) => {
      const place = starts.take(clientAddress(request));
      if (place.position > STARTS_PER_MIN) {
        const retryS = Math.max(1, Math.ceil((place.resetAt - Date.now()) / 1000));
        reply.header('retry-after', retryS);
        throw new RateLimitedError(
          `Too many device logins from this address: at most ${STARTS_PER_MIN} a minute. Retry in ${retryS} seconds.`,
        );
      }
      const started = await startDeviceLogin(
        deps,
        { ...callOf(request), userAgent: request.headers['user-agent'] },
        request.body,
      );
      // The address the client reached Berth at: the one the person's browser reaches too.
      const uri = `${request.protocol}://${request.host}/device`;
      reply.header('cache-control', 'no-store');
      return {
        device_code: started.deviceCode,
        user_code: started.userCode,
        verification_uri: uri,
        verification_uri_complete: `${uri}?user_code=${started.userCode}`,
        expires_in: started.expiresIn,
        interval: started.interval,
      };
    },
  );

  app.post(
    '/device/token',
    {
      schema: {
        summary: 'Poll for the token of a device login (RFC 8628 device access token request)',
        description:
          'grant_type urn:ietf:params:oauth:grant-type:device_code. Answers 400 authorization_pending until ' +
          'someone decides, slow_down (wait 5 seconds more, from now on) when polled sooner than the interval, ' +
          'access_denied, expired_token; once approved, the token, once (then invalid_grant). docs/access.md.',
        consumes: ['application/json', 'application/x-www-form-urlencoded'],
        body: DeviceTokenBody,
        response: { 200: DeviceToken, ...OAUTH_RESPONSES },
      },
    },
    async (request, reply) => {
      if (request.body.grant_type !== DEVICE_CODE_GRANT) {
        return oauthError(reply, 400, 'unsupported_grant_type', `grant_type must be ${DEVICE_CODE_GRANT}`);
      }
      const result = await pollDeviceLogin(
        deps,
        { ...callOf(request), userAgent: request.headers['user-agent'] },
        request.body,
      );
      if ('refused' in result) return oauthError(reply, 400, result.refused, result.description);
      reply.header('cache-control', 'no-store');
      return {
        access_token: result.token,
        token_type: 'Bearer' as const,
        token_id: result.tokenId,
        account_id: result.accountId,
        role: result.role,
        email: result.email,
      };
    },
  );
};

function deviceLoginView(row: Awaited<ReturnType<typeof waitingDeviceLogin>>) {
  return {
    user_code: row.user_code,
    client_id: row.client_id,
    device_name: row.device_name,
    client_address: row.client_address,
    user_agent: row.user_agent,
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    state: row.state === 'collected' ? ('approved' as const) : row.state,
  };
}

const DEVICE_LOGIN_ANSWER = {
  200: Envelope(Type.Object({ device_login: DeviceLogin })),
  ...errorResponses(401, 403, 404, 429, 500),
};

export const deviceLoginRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const misses = new MemoryWindows(60_000);

  /**
   * The signed-in person calling: only a session approves (a token approving would mint a token
   * outliving itself). Unknown codes count against the session, past MISSES_PER_MIN a 429.
   */
  async function asPerson<T>(request: FastifyRequest, reply: FastifyReply, work: () => Promise<T>) {
    const auth = authOf(request);
    if (!auth.sessionId || !auth.userId) {
      throw new ForbiddenError(
        'Approving a device login needs a person signed in to the console (a session), not an API token',
      );
    }
    const window = misses.counted(auth.sessionId);
    if (window && window.position >= MISSES_PER_MIN) {
      const retryS = Math.max(1, Math.ceil((window.resetAt - Date.now()) / 1000));
      reply.header('retry-after', retryS);
      throw new RateLimitedError(`Too many unknown codes: try again in ${retryS} seconds`);
    }
    try {
      return await work();
    } catch (error) {
      if (error instanceof NotFoundError) misses.take(auth.sessionId);
      throw error;
    }
  }

  app.get(
    '/device-logins/:userCode',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'A device login waiting for approval, by its user code (for the signed-in person only)',
        description:
          'What the console shows before approving: the client and the machine that asked. 404 once it is ' +
          'decided or expired. docs/access.md.',
        params: DeviceLoginParams,
        response: DEVICE_LOGIN_ANSWER,
      },
    },
    async (request, reply) =>
      asPerson(request, reply, async () =>
        success({ device_login: deviceLoginView(await waitingDeviceLogin(deps, request.params.userCode)) }),
      ),
  );

  for (const [action, decision] of [
    ['approve', 'approved'],
    ['deny', 'denied'],
  ] as const) {
    app.post(
      `/device-logins/:userCode/${action}`,
      {
        config: { role: 'viewer' },
        schema: {
          summary:
            decision === 'approved'
              ? 'Approve a device login: its client receives a token of yours, with your role, once'
              : 'Deny a device login: its client is told access_denied',
          description:
            'The signed-in person only (with X-CSRF-Token); audited. The token is named "berth login on ' +
            '<device>", listed in GET /v1/tokens and revocable. docs/access.md.',
          params: DeviceLoginParams,
          response: DEVICE_LOGIN_ANSWER,
        },
      },
      async (request, reply) =>
        asPerson(request, reply, async () => {
          const person = { ...actorOf(request), userId: authOf(request).userId as string };
          const row = await decideDeviceLoginOf(deps, person, request.params.userCode, decision);
          return success({ device_login: deviceLoginView(row) });
        }),
    );
  }
};

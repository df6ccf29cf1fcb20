/**
 * OpenID Connect single sign-on (docs/sso.md): an account's settings (/v1/sso, owners) and the sign-in
 * itself (/auth/sso, no token needed). The browser keeps the sign-in's PKCE verifier in a cookie of its
 * own (`berth_sso`, HttpOnly, only sent to /auth/sso) from start to callback: the flow stored under the
 * state only holds its challenge, so a state alone, or a stolen code, signs nobody in.
 * @module
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { SsoCallbackBody, SsoSettingsBody, SsoStartBody } from '../../domain/sso-inputs.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import type { SignInCall } from '../../domain/usecases/sessions.ts';
import {
  deleteSsoSettings,
  finishSso,
  readSsoSettings,
  redirectUriOf,
  SSO_FLOW_MS,
  setSsoSettings,
  startSso,
} from '../../domain/usecases/single-sign-on.ts';
import { actorOf, authOf, callOf } from '../plugins/auth.ts';
import type { AuthFailureLimit } from '../plugins/auth-failures.ts';
import { AUTH_ERRORS, Envelope, errorResponses } from '../schemas/common.ts';
import { SignedIn } from '../schemas/sessions.ts';
import { SsoSettingsView, SsoStarted } from '../schemas/sso.ts';
import { success } from '../views.ts';
import { startSession } from './sessions.ts';

const FLOW_COOKIE = 'berth_sso';
const FLOW_COOKIE_PATH = '/auth/sso';

/** This server's address as the browser reached it (behind a trusted proxy: the proxy's). */
const originOf = (request: FastifyRequest) => `${request.protocol}://${request.host}`;

function setFlowCookie(request: FastifyRequest, reply: FastifyReply, verifier: string, maxAgeS: number) {
  reply.header(
    'set-cookie',
    stringifySetCookie({
      name: FLOW_COOKIE,
      value: verifier,
      path: FLOW_COOKIE_PATH,
      httpOnly: true,
      // Lax: the callback page's request is the console's own, but Lax also lets a provider that posts
      // back (a top-level navigation) keep the flow working.
      sameSite: 'lax',
      secure: request.protocol === 'https',
      maxAge: maxAgeS,
    }),
  );
}

function flowVerifier(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  const value = header ? parseCookie(header)[FLOW_COOKIE] : undefined;
  return value && /^[A-Za-z0-9_-]{43,128}$/.test(value) ? value : undefined;
}

export const ssoRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const withRedirect = <T extends object>(request: FastifyRequest, view: T) => {
    const { accountId } = authOf(request);
    return {
      ...view,
      redirect_uri: redirectUriOf(originOf(request), accountId),
      sign_in_url: `${originOf(request)}/#/sign-in?account=${accountId}`,
    };
  };

  app.get(
    '/sso',
    {
      config: { role: 'owner', wholeAccount: true },
      schema: {
        summary: "The account's single sign-on settings (never the client secret)",
        description: '404 when none are set. docs/sso.md.',
        response: { 200: Envelope(Type.Object({ sso: SsoSettingsView })), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    async (request) => {
      const view = await readSsoSettings(deps, authOf(request).accountId);
      return success({ sso: withRedirect(request, view) });
    },
  );

  app.put(
    '/sso',
    {
      config: { role: 'owner', wholeAccount: true },
      schema: {
        summary: "Set the account's OpenID Connect provider, allowed email domains and default role",
        description:
          'The client secret is sealed and never shown back; leave it out to keep the stored one. docs/sso.md.',
        body: SsoSettingsBody,
        response: {
          200: Envelope(Type.Object({ sso: SsoSettingsView })),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const view = await setSsoSettings(deps, actorOf(request), request.body);
      return success({ sso: withRedirect(request, view) });
    },
  );

  app.delete(
    '/sso',
    {
      config: { role: 'owner', wholeAccount: true },
      schema: {
        summary: "Remove the account's single sign-on (members keep their memberships and sessions)",
        response: {
          200: Envelope(Type.Object({ deleted: Type.Boolean() })),
          ...errorResponses(...AUTH_ERRORS),
        },
      },
    },
    async (request) => {
      await deleteSsoSettings(deps, actorOf(request));
      return success({ deleted: true });
    },
  );
};

export const ssoSignInRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps;
  authFailures: AuthFailureLimit;
}> = async (app, { deps, authFailures }) => {
  app.post(
    '/sso/start',
    {
      schema: {
        summary:
          'Start signing in with single sign-on: answers the identity provider URL to send the browser to',
        description:
          "The email's domain picks the account whose single sign-on takes it (or `account_id` names it). Sets " +
          'the berth_sso cookie the callback needs. docs/sso.md.',
        body: SsoStartBody,
        response: {
          200: Envelope(SsoStarted),
          ...errorResponses(404, 409, 422, 429, 500),
        },
      },
    },
    async (request, reply) => {
      const started = await startSso(deps, request.body, originOf(request));
      setFlowCookie(request, reply, started.verifier, SSO_FLOW_MS / 1000);
      return success({ authorization_url: started.authorizationUrl, account_id: started.accountId });
    },
  );

  app.post(
    '/sso/callback',
    {
      schema: {
        summary:
          "Finish signing in with single sign-on: the provider's answer, from the console's callback page",
        description:
          'Checks the state (once, in the browser that started it), then the ID token (issuer, audience, nonce); ' +
          'a verified email of an allowed domain signs in, made a member with the default role the first time. ' +
          'Every refusal is audited (sso.refused_*). Sets the session cookie. docs/sso.md.',
        body: SsoCallbackBody,
        response: { 200: Envelope(SignedIn), ...errorResponses(401, 403, 422, 429, 500) },
      },
    },
    async (request, reply) => {
      const call: SignInCall = { ...callOf(request), userAgent: request.headers['user-agent'] };
      const verifier = flowVerifier(request);
      // Whatever the outcome, the flow is over: its cookie goes.
      setFlowCookie(request, reply, '', 0);
      const result = await authFailures.guard(request, reply, () =>
        finishSso(deps, call, request.body, verifier),
      );
      return startSession(request, reply, result);
    },
  );
};

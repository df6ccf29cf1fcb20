/**
 * Passkeys (WebAuthn): a person's own, managed in a signed-in session (/v1/passkeys), and signing in with
 * one (/auth/passkey-options, /auth/passkey). docs/access.md.
 * @module
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import type { Selectable } from 'kysely';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import {
  authenticationOptions,
  passkeysOf,
  type RelyingParty,
  registerPasskey,
  registrationOptions,
  removePasskey,
  signInWithPasskey,
} from '../../domain/usecases/passkeys.ts';
import type { PasskeysTable } from '../../store/schema.ts';
import { actorOf, authOf } from '../plugins/auth.ts';
import type { AuthFailureLimit } from '../plugins/auth-failures.ts';
import { CLOSED, Envelope, errorResponses, NoQuery } from '../schemas/common.ts';
import {
  AuthenticationOptions,
  Passkey,
  PasskeyParams,
  PasskeySignInBody,
  RegisterPasskeyBody,
  RegistrationOptions,
} from '../schemas/passkeys.ts';
import { SignedIn } from '../schemas/sessions.ts';
import { success } from '../views.ts';
import { SIGN_IN_ERRORS, signInCall, startSession } from './sessions.ts';

/**
 * The site a passkey belongs to is the address the browser reached Berth at (its Host, or a trusted
 * proxy's X-Forwarded-Host and -Proto): a passkey registered there works there. Not BERTH_PUBLIC_URL,
 * which is where deployed services answer: passkeys bound to it would be offered to every service's
 * pages under that domain.
 */
function relyingPartyOf(request: FastifyRequest): RelyingParty {
  // URL drops the scheme's default port, as the browser does in the origin it signs.
  const origin = new URL(`${request.protocol}://${request.host}`).origin;
  return { id: request.hostname, origin };
}

function passkeyView(p: Selectable<PasskeysTable>) {
  return {
    id: p.id,
    name: p.name,
    transports: p.transports,
    created_at: p.created_at.toISOString(),
    last_used_at: p.last_used_at?.toISOString() ?? null,
  };
}

const withSession = (request: FastifyRequest) => ({
  ...actorOf(request),
  sessionId: authOf(request).sessionId,
});

export const passkeySignInRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps;
  authFailures: AuthFailureLimit;
}> = async (app, { deps, authFailures }) => {
  app.post(
    '/passkey-options',
    {
      schema: {
        summary: 'Begin signing in with a passkey: the options for the browser (startAuthentication)',
        description: 'Its challenge works once, for five minutes. docs/access.md.',
        body: Type.Object({}, CLOSED),
        response: {
          200: Envelope(Type.Object({ options: AuthenticationOptions })),
          ...errorResponses(422, 500),
        },
      },
    },
    async (request) => success({ options: await authenticationOptions(deps, relyingPartyOf(request)) }),
  );

  app.post(
    '/passkey',
    {
      schema: {
        summary: 'Sign in with a passkey: sets the session cookie, as a password sign-in does',
        description:
          'An unknown passkey, a used or expired challenge, a bad signature and a counter gone back are the ' +
          'same 401. docs/access.md.',
        body: PasskeySignInBody,
        response: { 200: Envelope(SignedIn), ...SIGN_IN_ERRORS },
      },
    },
    async (request, reply) => {
      const result = await authFailures.guard(request, reply, () =>
        signInWithPasskey(deps, signInCall(request), relyingPartyOf(request), request.body),
      );
      return startSession(request, reply, result);
    },
  );
};

export const passkeyRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/passkeys',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "The caller's passkeys, oldest first",
        description: "A person's own; none for a token no person owns.",
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ passkeys: Type.Array(Passkey) })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const rows = await passkeysOf(deps, actorOf(request));
      return success({ passkeys: rows.map(passkeyView) });
    },
  );

  app.post(
    '/passkeys/registration-options',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'Begin adding a passkey: the options for the browser (startRegistration)',
        description:
          'Only in a signed-in session (403 with a token). Its challenge works once, for five minutes. ' +
          'docs/access.md.',
        body: Type.Object({}, CLOSED),
        response: {
          200: Envelope(Type.Object({ options: RegistrationOptions })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) =>
      success({ options: await registrationOptions(deps, withSession(request), relyingPartyOf(request)) }),
  );

  app.post(
    '/passkeys',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'Add a passkey: the credential the browser made from the registration options',
        description:
          'Only in a signed-in session (403 with a token). A credential that answers no registration of ' +
          'yours, or does not verify, is a 422 on `credential`. docs/access.md.',
        body: RegisterPasskeyBody,
        response: {
          200: Envelope(Type.Object({ passkey: Passkey })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const passkey = await registerPasskey(
        deps,
        withSession(request),
        relyingPartyOf(request),
        request.body,
      );
      return success({ passkey: passkeyView(passkey) });
    },
  );

  app.delete(
    '/passkeys/:passkeyId',
    {
      config: { role: 'viewer' },
      schema: {
        summary: 'Remove one of your passkeys: it signs in no more',
        description: "Only in a signed-in session (403 with a token). 404 for anyone else's.",
        params: PasskeyParams,
        response: {
          200: Envelope(Type.Object({ removed: Type.Boolean() })),
          ...errorResponses(401, 403, 404, 429, 500),
        },
      },
    },
    async (request) => {
      await removePasskey(deps, withSession(request), request.params.passkeyId);
      return success({ removed: true });
    },
  );
};

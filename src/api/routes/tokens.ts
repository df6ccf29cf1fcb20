import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { NewTokenBody } from '../../domain/inputs.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { createToken, listTokens, revokeTokenOf } from '../../domain/usecases/people.ts';
import { actorOf, authOf, type TokenAuthenticator } from '../plugins/auth.ts';
import { AUTH_ERRORS, Envelope, errorResponses, NoQuery } from '../schemas/common.ts';
import { CreatedToken, Token, TokenParams } from '../schemas/tokens.ts';
import { success, tokenView } from '../views.ts';

/** The token a call was made with; null for a person's session (sessions are not tokens). */
function currentTokenOf(request: FastifyRequest): string | null {
  const auth = authOf(request);
  return auth.sessionId ? null : auth.tokenId;
}

export const tokenRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps;
  authenticator: TokenAuthenticator;
}> = async (app, { deps, authenticator }) => {
  app.post(
    '/tokens',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Make an API token (shown only in this response)',
        description:
          "Named, with a role no higher than the caller's (a higher one is a 422 on `role`), optionally limited to " +
          'some environments (`environment_ids`), to reads (`read_only`) and in time (`expires_at`). A token made ' +
          'by a member belongs to them: it never does more than their membership, and ends with it. docs/access.md.',
        body: NewTokenBody,
        response: {
          200: Envelope(Type.Object({ token: CreatedToken })),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const auth = authOf(request);
      const { token, id } = await createToken(deps, { ...actorOf(request), role: auth.role }, request.body);
      const made = (await listTokens(deps, auth.accountId)).find((t) => t.id === id);
      if (!made) throw new Error('the token just made is not there');
      return success({ token: { ...tokenView(made, currentTokenOf(request)), token } });
    },
  );

  app.get(
    '/tokens',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: "The account's API tokens, newest first (revoked ones too, with when)",
        description:
          '`current` marks the token the call was made with (none when a signed-in session made it). docs/access.md.',
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ tokens: Type.Array(Token) })),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const tokens = await listTokens(deps, authOf(request).accountId);
      const current = currentTokenOf(request);
      return success({ tokens: tokens.map((t) => tokenView(t, current)) });
    },
  );

  app.delete(
    '/tokens/:tokenId',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Revoke an API token',
        description:
          "Every Berth process refuses it within a second. 404 for a token already revoked; 403 for a token whose role is above the caller's (an admin cannot revoke the owner's).",
        params: TokenParams,
        response: {
          200: Envelope(Type.Object({ revoked: Type.Boolean() })),
          ...errorResponses(...AUTH_ERRORS),
        },
      },
    },
    async (request) => {
      await revokeTokenOf(deps, { ...actorOf(request), role: authOf(request).role }, request.params.tokenId);
      // This process at once; the others when the `access` notification reaches them.
      authenticator.forget();
      return success({ revoked: true });
    },
  );
};

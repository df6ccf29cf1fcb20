/**
 * Signing in (/auth, no token needed) and a person's sessions (/v1/sessions). docs/access.md.
 * @module
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { UnauthorizedError } from '../../domain/errors.ts';
import { csrfTokenOf } from '../../domain/passwords.ts';
import type { Role } from '../../domain/roles.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { removeMemberBy } from '../../domain/usecases/people.ts';
import {
  acceptInvitation,
  createInvitation,
  endSessionOf,
  invitationPath,
  listInvitations,
  listSessions,
  redeemSignInLink,
  revokeInvitation,
  type SignInCall,
  signIn,
} from '../../domain/usecases/sessions.ts';
import { listMembers } from '../../store/repositories/users.ts';
import type { Mailer } from '../mailer.ts';
import { actorOf, authOf, callOf } from '../plugins/auth.ts';
import { type AuthFailureLimit, authFailureLimit } from '../plugins/auth-failures.ts';
import {
  authenticateSession,
  checkCsrf,
  clearSessionCookie,
  sessionSecret,
  setSessionCookie,
} from '../plugins/sessions.ts';
import { Envelope, errorResponses, NoQuery, Nullable } from '../schemas/common.ts';
import {
  AcceptInvitationBody,
  Invitation,
  InvitationBody,
  InvitationParams,
  Member,
  MemberParams,
  PendingInvitation,
  Session,
  SessionParams,
  SignedIn,
  SignInBody,
  SignInLinkBody,
} from '../schemas/sessions.ts';
import { invitationView, success } from '../views.ts';

export function signInCall(request: FastifyRequest): SignInCall {
  return { ...callOf(request), userAgent: request.headers['user-agent'] };
}

function signedIn(
  secret: string,
  s: { session: { id: string; account_id: string }; user: { id: string; email: string }; role: Role },
) {
  return {
    session_id: s.session.id,
    csrf_token: csrfTokenOf(secret),
    user: { id: s.user.id, email: s.user.email },
    account_id: s.session.account_id,
    role: s.role,
  };
}

/** A sign-in that made a session: its cookie set, and what the console needs of it answered. */
export function startSession(
  request: FastifyRequest,
  reply: FastifyReply,
  result: { secret: string } & Parameters<typeof signedIn>[1],
) {
  setSessionCookie(request, reply, result.secret);
  return success(signedIn(result.secret, result));
}

export const SIGN_IN_ERRORS = errorResponses(401, 403, 422, 429, 500);

export const signInRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps;
  /** Failures per client address: the very limit /v1's tokens count in. */
  authFailures: AuthFailureLimit;
  authFailuresPerMin: number;
}> = async (app, { deps, authFailures, authFailuresPerMin }) => {
  // Password guessing is held per address and per account: one address guessing many accounts, or many
  // addresses guessing one account, each hit a limit. Unknown emails count too (nothing tells them apart).
  const perAccount = authFailureLimit(authFailuresPerMin, undefined, {
    of: (request) => `email:${String((request.body as { email?: string } | undefined)?.email).toLowerCase()}`,
    what: 'this account',
  });

  app.post(
    '/sign-in',
    {
      schema: {
        summary: 'Sign in with email and password: sets the session cookie',
        description:
          'Answers the session and its CSRF token, which every cookie-authenticated write sends in X-CSRF-Token. ' +
          'A wrong email or password is the same 401. docs/access.md.',
        body: SignInBody,
        response: { 200: Envelope(SignedIn), ...SIGN_IN_ERRORS },
      },
    },
    async (request, reply) => {
      const result = await authFailures.guard(request, reply, () =>
        perAccount.guard(request, reply, () => signIn(deps, signInCall(request), request.body)),
      );
      return startSession(request, reply, result);
    },
  );

  app.post(
    '/sign-in-link',
    {
      schema: {
        summary: 'Sign in with a one-time link (optionally setting a password): sets the session cookie',
        description: 'A link works once, for a day. docs/access.md.',
        body: SignInLinkBody,
        response: { 200: Envelope(SignedIn), ...SIGN_IN_ERRORS },
      },
    },
    async (request, reply) => {
      const result = await authFailures.guard(request, reply, () =>
        redeemSignInLink(deps, signInCall(request), request.body),
      );
      return startSession(request, reply, result);
    },
  );

  app.post(
    '/accept-invitation',
    {
      schema: {
        summary: 'Accept an invitation: makes the user (with this password) and the membership, and signs in',
        description:
          'An invitation works once, for a week. Someone who has a password already gives that one. docs/access.md.',
        body: AcceptInvitationBody,
        response: { 200: Envelope(SignedIn), ...SIGN_IN_ERRORS },
      },
    },
    async (request, reply) => {
      const result = await authFailures.guard(request, reply, () =>
        acceptInvitation(deps, signInCall(request), request.body),
      );
      return startSession(request, reply, result);
    },
  );

  app.get(
    '/session',
    {
      schema: {
        summary: 'The session the cookie holds, with its CSRF token; null when none works',
        description:
          'Answers 200 either way: the console asks on every load, and a signed-out browser is no error.',
        response: { 200: Envelope(Nullable(SignedIn)), ...errorResponses(403, 500) },
      },
    },
    async (request) => {
      const secret = sessionSecret(request);
      const auth = secret
        ? await authenticateSession(deps.store.db, secret).catch((error: unknown) => {
            if (error instanceof UnauthorizedError) return null;
            throw error;
          })
        : null;
      if (!secret || !auth) return success(null);
      return success(
        signedIn(secret, {
          session: { id: auth.tokenId, account_id: auth.accountId },
          user: { id: auth.userId ?? '', email: auth.userEmail ?? '' },
          role: auth.role,
        }),
      );
    },
  );

  app.post(
    '/sign-out',
    {
      schema: {
        summary: 'End the session the cookie holds, and clear the cookie (needs X-CSRF-Token)',
        response: {
          200: Envelope(Type.Object({ signed_out: Type.Boolean() })),
          ...errorResponses(401, 403, 500),
        },
      },
    },
    async (request, reply) => {
      const secret = sessionSecret(request);
      if (!secret) throw new UnauthorizedError();
      const auth = await authenticateSession(deps.store.db, secret);
      checkCsrf(request, secret);
      request.auth = auth;
      await endSessionOf(deps, actorOf(request), auth.tokenId);
      clearSessionCookie(request, reply);
      return success({ signed_out: true });
    },
  );
};

export const sessionRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; mailer: Mailer | null }> = async (
  app,
  { deps, mailer },
) => {
  app.post(
    '/invitations',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Invite someone by email, with a role no higher than your own',
        description:
          'Answers the link (shown only here) and mails it when Berth can send mail (BERTH_SMTP_URL). It works ' +
          'once, for a week. docs/access.md.',
        body: InvitationBody,
        response: {
          200: Envelope(Type.Object({ invitation: Invitation })),
          ...errorResponses(401, 403, 409, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const auth = authOf(request);
      const { secret, invitation } = await createInvitation(
        deps,
        { ...actorOf(request), role: auth.role },
        request.body,
      );
      const path = invitationPath(secret);
      // The address the inviter reached Berth at: the one the invited person's browser reaches too.
      const link = `${request.protocol}://${request.host}${path}`;
      const mailed = mailer ? await mailer.invite(invitation.email, link, auth.userEmail) : false;
      return success({
        invitation: {
          id: invitation.id,
          email: invitation.email,
          role: invitation.role,
          expires_at: invitation.expires_at.toISOString(),
          token: secret,
          path,
          mailed,
        },
      });
    },
  );

  app.get(
    '/invitations',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: "The account's invitations waiting to be accepted, newest first",
        description:
          'Who was invited, with which role, when, by whom, and until when the link works; never the link ' +
          '(shown only when the invitation was made). Accepted and expired ones are left out. docs/access.md.',
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ invitations: Type.Array(PendingInvitation) })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const rows = await listInvitations(deps, authOf(request).accountId);
      return success({ invitations: rows.map(invitationView) });
    },
  );

  app.delete(
    '/invitations/:invitationId',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Revoke an invitation: its link stops working at once',
        description:
          '404 for one accepted, expired or revoked already; 403 for one whose role is above yours. docs/access.md.',
        params: InvitationParams,
        response: {
          200: Envelope(Type.Object({ revoked: Type.Boolean() })),
          ...errorResponses(401, 403, 404, 429, 500),
        },
      },
    },
    async (request) => {
      const revoker = { ...actorOf(request), role: authOf(request).role };
      await revokeInvitation(deps, revoker, request.params.invitationId);
      return success({ revoked: true });
    },
  );

  app.get(
    '/members',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: "The account's members, oldest first",
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ members: Type.Array(Member) })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const members = await listMembers(deps.store.db, authOf(request).accountId);
      return success({
        members: members.map((m) => ({
          user_id: m.user_id,
          email: m.email,
          display_name: m.display_name,
          role: m.role,
          environment_ids: m.environment_ids,
          created_at: m.created_at.toISOString(),
        })),
      });
    },
  );

  app.delete(
    '/members/:userId',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Remove a member: their tokens and sessions end, their streams close',
        description:
          'Never a member whose role is above yours (403), never the last owner (409). docs/access.md.',
        params: MemberParams,
        response: {
          200: Envelope(Type.Object({ removed: Type.Boolean() })),
          ...errorResponses(401, 403, 404, 409, 429, 500),
        },
      },
    },
    async (request) => {
      await removeMemberBy(deps, { ...actorOf(request), role: authOf(request).role }, request.params.userId);
      return success({ removed: true });
    },
  );

  app.get(
    '/sessions',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "The caller's signed-in sessions that still work, newest first",
        description:
          "A person's own sessions, in every account they are a member of; none for a token no person owns.",
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ sessions: Type.Array(Session) })),
          ...errorResponses(401, 403, 422, 429, 500),
        },
      },
    },
    async (request) => {
      const auth = authOf(request);
      const rows = auth.userId ? await listSessions(deps, auth.userId) : [];
      return success({
        sessions: rows.map((s) => ({
          id: s.id,
          account_id: s.account_id,
          created_at: s.created_at.toISOString(),
          last_seen_at: s.last_seen_at.toISOString(),
          expires_at: s.expires_at.toISOString(),
          user_agent: s.user_agent,
          client_address: s.client_address,
          current: s.id === auth.sessionId,
        })),
      });
    },
  );

  app.delete(
    '/sessions/:sessionId',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "End one of the caller's sessions",
        description:
          "Its cookie stops working and its open streams close, in every Berth process. 404 for anyone else's.",
        params: SessionParams,
        response: {
          200: Envelope(Type.Object({ ended: Type.Boolean() })),
          ...errorResponses(401, 403, 404, 429, 500),
        },
      },
    },
    async (request) => {
      await endSessionOf(deps, actorOf(request), request.params.sessionId);
      return success({ ended: true });
    },
  );
};

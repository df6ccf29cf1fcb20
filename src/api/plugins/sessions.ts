/**
 * Sessions of people signed in through the console (docs/access.md): a cookie, `berth_session`, holding a
 * random secret (only its SHA-256 is stored). HttpOnly: no script reads it; SameSite=Lax: other sites'
 * requests do not carry it except top-level navigations (an emailed invitation link opens the console
 * signed in); Secure whenever the request came over HTTPS (directly, or through a trusted proxy's
 * X-Forwarded-Proto). Every write authenticated by the cookie carries the session's CSRF token in
 * `X-CSRF-Token`, which only a page that could read the sign-in answer knows. Looked up on every request
 * (no cache): an ended session, or a removed member's, is refused at once in every process.
 * @module
 */
import { timingSafeEqual } from 'node:crypto';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ForbiddenError, UnauthorizedError } from '../../domain/errors.ts';
import { csrfTokenOf, hashSecret } from '../../domain/passwords.ts';
import { effectiveFeatures, type Plan } from '../../domain/plans.ts';
import { scopeOf } from '../../domain/roles.ts';
import { SESSION_IDLE_MS, SESSION_MAX_MS } from '../../domain/usecases/sessions.ts';
import type { Db } from '../../store/database.ts';
import { findLiveSession, touchSession } from '../../store/repositories/sessions.ts';
import type { AuthContext } from './auth.ts';

export const SESSION_COOKIE = 'berth_session';
export const CSRF_HEADER = 'x-csrf-token';
/** `last_seen_at` (what idle expiry counts from) is written at most once a minute per session. */
const TOUCH_MS = 60_000;
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The session secret the request's cookie carries, if any. */
export function sessionSecret(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  const secret = header ? parseCookie(header)[SESSION_COOKIE] : undefined;
  return secret && /^[A-Za-z0-9_-]{43}$/.test(secret) ? secret : undefined;
}

/** How an open stream remembers its session, to look it up again when access changes (open-streams.ts). */
export const SESSION_CREDENTIAL = 'session ';

/** What authenticated the request: its Authorization header, or else its session. */
export function credentialOf(request: FastifyRequest): string | undefined {
  const secret = request.headers.authorization ? undefined : sessionSecret(request);
  return secret ? SESSION_CREDENTIAL + secret : request.headers.authorization;
}

/** The AuthContext of a live session, or a 401. */
export async function authenticateSession(db: Db, secret: string): Promise<AuthContext> {
  const row = await findLiveSession(db, hashSecret(secret), new Date(Date.now() - SESSION_IDLE_MS));
  if (!row) throw new UnauthorizedError();
  const now = new Date();
  if (now.getTime() - row.last_seen_at.getTime() >= TOUCH_MS) await touchSession(db, row.id, now);
  if (row.plan === 'none') throw new ForbiddenError("You don't have an active plan");
  return {
    accountId: row.account_id,
    tokenId: row.id,
    sessionId: row.id,
    plan: row.plan as Plan,
    features: effectiveFeatures(row.plan as Plan, row.features),
    role: row.role,
    environments: scopeOf(row.environment_ids),
    readOnly: false,
    expiresAt: null,
    userId: row.user_id,
    userEmail: row.email,
    tokenName: null,
  };
}

/** A write authenticated by the cookie must carry the session's CSRF token (403 otherwise). */
export function checkCsrf(request: FastifyRequest, secret: string): void {
  if (SAFE.has(request.method)) return;
  const sent = request.headers[CSRF_HEADER];
  const expected = Buffer.from(csrfTokenOf(secret));
  const given = Buffer.from(typeof sent === 'string' ? sent : '');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new ForbiddenError(
      `A request signed in by the session cookie must send the session's CSRF token in the ${CSRF_HEADER} header (from sign-in or GET /auth/session)`,
    );
  }
}

// Set and read here, on the few requests that sign in or out and those that carry no Authorization
// header: a cookie plugin would add a parsing and a writing hook to every request, polls included.
const COOKIE = { name: SESSION_COOKIE, path: '/', httpOnly: true, sameSite: 'lax' } as const;

export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, secret: string): void {
  reply.header(
    'set-cookie',
    stringifySetCookie({
      ...COOKIE,
      value: secret,
      secure: request.protocol === 'https',
      maxAge: SESSION_MAX_MS / 1000,
    }),
  );
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.header(
    'set-cookie',
    stringifySetCookie({
      ...COOKIE,
      value: '',
      secure: request.protocol === 'https',
      expires: new Date(0),
      maxAge: 0,
    }),
  );
}

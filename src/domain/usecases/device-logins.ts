/**
 * `berth login` without pasting a token: the OAuth 2.0 Device Authorization Grant (RFC 8628,
 * docs/access.md). A client asks for a device code (its own, long and secret) and a user code (short,
 * for a person to read and type); a person signed in to the console approves or denies the user code;
 * the client, polling with the device code, then receives a token of that person, once. Both codes are
 * stored as their SHA-256; the token is made when collected, so nothing stored is ever a credential.
 * @module
 */
import { randomInt, randomUUID } from 'node:crypto';
import { insertApiToken } from '../../store/repositories/accounts.ts';
import {
  decideDeviceLogin,
  deleteDeviceLoginsExpiredBefore,
  findWaitingDeviceLogin,
  insertDeviceLogin,
  lockDeviceLogin,
  updateDeviceLogin,
} from '../../store/repositories/device-logins.ts';
import { findMembership, findUser } from '../../store/repositories/users.ts';
import { hashApiToken, newApiToken } from '../api-token.ts';
import { NotFoundError } from '../errors.ts';
import { hashSecret, newSecret } from '../passwords.ts';
import type { Role } from '../roles.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import type { SignInCall } from './sessions.ts';

/**
 * RFC 8628 §6.1's alphabet: 20 consonants, no vowels (no words spelt by chance) and no digits (no 0/O or
 * 1/I to mix up). Eight of them: 20^8, about 2^34.6, against at most a handful of guesses a minute each.
 */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE_LENGTH = 8;
/** A person has ten minutes to approve. */
export const DEVICE_LOGIN_TTL_S = 600;
/** RFC 8628's default polling interval; each poll too soon adds 5 seconds, up to a minute. */
export const POLL_INTERVAL_S = 5;
const SLOW_DOWN_S = 5;
const MAX_INTERVAL_S = 60;
/** Finished device logins are forgotten a day after they expire (the audit log keeps the decision). */
const KEEP_MS = 24 * 60 * 60 * 1000;

/** `BCDF-GHJK`: how a user code is shown. */
export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** A user code as typed: any case, with or without the dash or spaces; null when it cannot be one. */
export function normalizeUserCode(typed: string): string | null {
  const code = typed.toUpperCase().replace(/[\s-]/g, '');
  if (code.length !== USER_CODE_LENGTH) return null;
  for (const char of code) if (!USER_CODE_ALPHABET.includes(char)) return null;
  return code;
}

function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

export interface DeviceLoginRequest {
  client_id: string;
  device_name?: string | undefined;
}

/** Starts a device login: the codes, shown once (the device code to the client alone). */
export async function startDeviceLogin(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  input: DeviceLoginRequest,
) {
  const db = deps.store.db;
  await deleteDeviceLoginsExpiredBefore(db, new Date(Date.now() - KEEP_MS));
  // A user code already in use (1 in 2^34 per live login) just draws again.
  for (;;) {
    const deviceCode = newSecret();
    const userCode = newUserCode();
    const row = await insertDeviceLogin(db, {
      id: randomUUID(),
      device_code_hash: hashSecret(deviceCode),
      user_code_hash: hashSecret(userCode),
      client_id: input.client_id,
      device_name: input.device_name ?? null,
      client_address: call.clientAddress ?? null,
      user_agent: call.userAgent?.slice(0, 400) ?? null,
      expires_at: new Date(Date.now() + DEVICE_LOGIN_TTL_S * 1000),
      interval_s: POLL_INTERVAL_S,
    });
    if (row)
      return {
        deviceCode,
        userCode: formatUserCode(userCode),
        expiresIn: DEVICE_LOGIN_TTL_S,
        interval: POLL_INTERVAL_S,
      };
  }
}

/** RFC 8628 §3.5's answers to a poll that gets no token (with RFC 6749's invalid_grant). */
export type PollRefusal =
  | 'authorization_pending'
  | 'slow_down'
  | 'access_denied'
  | 'expired_token'
  | 'invalid_grant';

export type PollResult =
  | { refused: PollRefusal; description: string }
  | { token: string; tokenId: string; accountId: string; role: Role; email: string };

const refused = (code: PollRefusal, description: string): PollResult => ({ refused: code, description });

/** The token name a device login's token gets: the machine the person approved. */
export function deviceTokenName(deviceName: string | null): string {
  return `berth login on ${deviceName ?? 'an unnamed device'}`;
}

/**
 * A client's poll. Answers (RFC 8628 §3.5) authorization_pending while no one decided, slow_down (and
 * 5 seconds more to wait, for this and every later poll) to a poll sooner than the interval after the
 * last, access_denied once denied, expired_token after ten minutes, and once approved the token, once:
 * the device code is then spent (invalid_grant), like an unknown one. Each poll holds the row locked, so
 * two processes never hand the token out twice.
 */
export async function pollDeviceLogin(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  input: { device_code: string; client_id: string },
): Promise<PollResult> {
  return deps.store.db.transaction().execute(async (trx) => {
    const row = await lockDeviceLogin(trx, hashSecret(input.device_code));
    if (!row || row.client_id !== input.client_id) {
      return refused('invalid_grant', 'This device code is unknown (or was issued to another client)');
    }
    if (row.state === 'collected') return refused('invalid_grant', 'This device code was used already');
    if (row.state === 'denied') return refused('access_denied', 'The login was denied in the console');
    const now = new Date();
    if (row.expires_at <= now) {
      return refused('expired_token', 'The code expired before anyone approved it: run berth login again');
    }
    if (row.state === 'pending') {
      const tooSoon =
        row.last_polled_at && now.getTime() - row.last_polled_at.getTime() < row.interval_s * 1000;
      const interval = tooSoon ? Math.min(MAX_INTERVAL_S, row.interval_s + SLOW_DOWN_S) : row.interval_s;
      await updateDeviceLogin(trx, row.id, { last_polled_at: now, interval_s: interval });
      return tooSoon
        ? refused('slow_down', `Polled too soon: wait ${interval} seconds between polls`)
        : refused('authorization_pending', 'Waiting for someone to approve the code in the console');
    }
    // Approved: the token is made now, for the member as they are now (a membership ended in between
    // ends the login too).
    const membership =
      row.account_id && row.user_id ? await findMembership(trx, row.account_id, row.user_id) : undefined;
    const user = row.user_id ? await findUser(trx, row.user_id) : undefined;
    if (!membership || !user)
      return refused('access_denied', 'The person who approved is no longer a member');
    const token = newApiToken();
    const tokenId = randomUUID();
    await insertApiToken(trx, {
      id: tokenId,
      account_id: membership.account_id,
      token_hash: hashApiToken(token),
      name: deviceTokenName(row.device_name),
      role: membership.role,
      owner_user_id: user.id,
    });
    await updateDeviceLogin(trx, row.id, { state: 'collected', token_id: tokenId, last_polled_at: now });
    const actor: Actor = {
      ...call,
      accountId: membership.account_id,
      tokenId: null,
      name: user.email,
      userId: user.id,
      userEmail: user.email,
      userAgent: call.userAgent?.slice(0, 400),
    };
    await recordAudit(trx, actor, 'api_token.create', { id: tokenId });
    return { token, tokenId, accountId: membership.account_id, role: membership.role, email: user.email };
  });
}

/** What the console shows a person about to approve: the code, and the client that asked. */
export async function waitingDeviceLogin(deps: Pick<Deps, 'store'>, userCode: string) {
  const code = normalizeUserCode(userCode);
  const row = code ? await findWaitingDeviceLogin(deps.store.db, hashSecret(code)) : undefined;
  if (!code || !row) throw new NotFoundError('Device login');
  return { ...row, user_code: formatUserCode(code) };
}

/**
 * A signed-in person approves (the client will receive a token of theirs, with their role) or denies a
 * waiting device login; audited either way. Once, before it expires.
 */
export async function decideDeviceLoginOf(
  deps: Pick<Deps, 'store'>,
  person: Actor & { userId: string },
  userCode: string,
  decision: 'approved' | 'denied',
) {
  const code = normalizeUserCode(userCode);
  if (!code) throw new NotFoundError('Device login');
  return deps.store.db.transaction().execute(async (trx) => {
    const row = await decideDeviceLogin(trx, hashSecret(code), {
      state: decision,
      account_id: person.accountId,
      user_id: person.userId,
    });
    if (!row) throw new NotFoundError('Device login');
    await recordAudit(trx, person, decision === 'approved' ? 'device_login.approve' : 'device_login.deny', {
      type: 'device_login',
      id: row.id,
    });
    return { ...row, user_code: formatUserCode(code) };
  });
}

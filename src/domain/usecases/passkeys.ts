/**
 * Passkeys (WebAuthn, docs/access.md) through @simplewebauthn/server: a signed-in person registers
 * passkeys, lists and removes them, and signs in with one, which starts a session exactly as a password
 * does. Every ceremony's challenge is stored (webauthn_challenges) and used once, within five minutes,
 * whichever Berth process the ceremony ends on. Passkeys are discoverable and verified by the user (PIN or
 * biometrics): signing in asks for no email, and a passkey alone is two factors.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { Db } from '../../store/database.ts';
import {
  deletePasskey,
  findPasskeyByCredential,
  insertChallenge,
  insertPasskey,
  listPasskeys,
  takeChallenge,
  usePasskey,
} from '../../store/repositories/passkeys.ts';
import { findMembership, findUser } from '../../store/repositories/users.ts';
import type { WebauthnChallengesTable } from '../../store/schema.ts';
import { ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from '../errors.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { oldestMembership, type SignInCall, startSession } from './sessions.ts';

/** A ceremony's challenge works this long (the browser is given a minute less to finish it). */
export const CHALLENGE_MS = 5 * 60 * 1000;

/** Who the passkeys belong to: the site the person's browser reached Berth at (routes/passkeys.ts). */
export interface RelyingParty {
  /** The host name, which the browser binds each passkey to. */
  id: string;
  /** `scheme://host[:port]`, what the browser signs as the page's origin. */
  origin: string;
}

const RP_NAME = 'Berth';
/** Every refusal of a sign-in is this one answer: nothing tells an unknown passkey from a bad signature. */
const REFUSED = 'This passkey was not accepted';

/** The caller's user, when they act through a session: passkeys are never added or removed by a token. */
async function sessionUser(db: Db, actor: Actor & { sessionId: string | null | undefined }) {
  const user = actor.sessionId && actor.userId ? await findUser(db, actor.userId) : undefined;
  if (!user) {
    throw new ForbiddenError(
      'Passkeys are added and removed in a signed-in console session, never with an API token',
    );
  }
  return user;
}

/**
 * @simplewebauthn/server, loaded on first use: with its ASN.1 and CBOR dependencies it is ~270 modules
 * and ~25 MB that a server nobody signs in to with a passkey never needs (docs/performance.md, "Memory").
 */
let loading: Promise<WebAuthn> | undefined;
type WebAuthn = typeof import('@simplewebauthn/server') & typeof import('@simplewebauthn/server/helpers');
function webauthn(): Promise<WebAuthn> {
  loading ??= Promise.all([import('@simplewebauthn/server'), import('@simplewebauthn/server/helpers')]).then(
    ([server, helpers]) => ({ ...server, ...helpers }),
  );
  return loading;
}

/** The challenge a response signed, read from its client data (undefined when that is not readable). */
async function challengeOf(clientDataJSON: string): Promise<string | undefined> {
  const { decodeClientDataJSON } = await webauthn();
  try {
    return decodeClientDataJSON(clientDataJSON).challenge;
  } catch {
    return undefined;
  }
}

/** A new challenge, stored for the ceremony: its bytes, which the options carry as base64url. */
async function newChallenge(db: Db, purpose: WebauthnChallengesTable['purpose'], userId: string | null) {
  const { isoBase64URL } = await webauthn();
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  await insertChallenge(db, {
    challenge: isoBase64URL.fromBuffer(bytes),
    purpose,
    user_id: userId,
    expires_at: new Date(Date.now() + CHALLENGE_MS),
  });
  return bytes;
}

/** What the browser needs to create a passkey for the signed-in person (never one they have already). */
export async function registrationOptions(
  deps: Pick<Deps, 'store'>,
  actor: Actor & { sessionId: string | null | undefined },
  rp: RelyingParty,
) {
  const db = deps.store.db;
  const user = await sessionUser(db, actor);
  const existing = await listPasskeys(db, user.id);
  const { generateRegistrationOptions } = await webauthn();
  return generateRegistrationOptions({
    rpName: RP_NAME,
    rpID: rp.id,
    userName: user.email,
    userDisplayName: user.display_name,
    // The user handle names the user and nothing else: their id, never their email.
    userID: new TextEncoder().encode(user.id),
    challenge: await newChallenge(db, 'registration', user.id),
    timeout: CHALLENGE_MS - 60_000,
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credential_id, transports: p.transports })),
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
  });
}

/**
 * Verifies a new passkey against a registration the same user began (the challenge, used up here), this
 * site and origin, and user verification; stores it. Any refusal is a 422 on `credential`.
 */
export async function registerPasskey(
  deps: Pick<Deps, 'store'>,
  actor: Actor & { sessionId: string | null | undefined },
  rp: RelyingParty,
  input: { name?: string | undefined; credential: RegistrationResponseJSON },
) {
  const db = deps.store.db;
  const user = await sessionUser(db, actor);
  const refuse = (why: string) => ValidationError.fields([{ field: 'credential', error: why }]);
  const { verifyRegistrationResponse, isoBase64URL } = await webauthn();
  const challenge = await challengeOf(input.credential.response.clientDataJSON);
  if (!challenge || !(await takeChallenge(db, challenge, 'registration', user.id))) {
    throw refuse(
      'credential answers no registration begun by you, or one used already or expired: begin again',
    );
  }
  const verified = await verifyRegistrationResponse({
    response: input.credential,
    expectedChallenge: challenge,
    expectedOrigin: rp.origin,
    expectedRPID: rp.id,
    requireUserVerification: true,
  }).catch(() => ({ verified: false as const }));
  if (!verified.verified) throw refuse('credential did not verify as a passkey for this site');
  const { credential } = verified.registrationInfo;
  return db.transaction().execute(async (trx) => {
    const passkey = await insertPasskey(trx, {
      id: randomUUID(),
      user_id: user.id,
      credential_id: credential.id,
      public_key: isoBase64URL.fromBuffer(credential.publicKey),
      counter: credential.counter,
      transports: credential.transports ?? [],
      name: input.name ?? 'Passkey',
    });
    if (!passkey) throw refuse('credential is a passkey registered already');
    await recordAudit(trx, actor, 'passkey.register', { id: passkey.id });
    return passkey;
  });
}

/** A person's passkeys (none for a token no person owns). */
export async function passkeysOf(deps: Pick<Deps, 'store'>, actor: Actor) {
  return actor.userId ? listPasskeys(deps.store.db, actor.userId) : [];
}

/** Removes one of the signed-in person's passkeys (404 for anyone else's). */
export async function removePasskey(
  deps: Pick<Deps, 'store'>,
  actor: Actor & { sessionId: string | null | undefined },
  id: string,
) {
  await deps.store.db.transaction().execute(async (trx) => {
    const user = await sessionUser(trx, actor);
    if (!(await deletePasskey(trx, user.id, id))) throw new NotFoundError('Passkey');
    await recordAudit(trx, actor, 'passkey.delete', { id });
  });
}

/** What the browser needs to sign in with any passkey of this site: the passkey names its user. */
export async function authenticationOptions(deps: Pick<Deps, 'store'>, rp: RelyingParty) {
  const { generateAuthenticationOptions } = await webauthn();
  return generateAuthenticationOptions({
    rpID: rp.id,
    challenge: await newChallenge(deps.store.db, 'authentication', null),
    timeout: CHALLENGE_MS - 60_000,
    userVerification: 'required',
  });
}

/**
 * Signs in with a passkey: the challenge (used up here, whatever follows), a known passkey whose user
 * handle matches, this site and origin, a verified user, a signature by its key and a counter that moved
 * forward. Every refusal is the same 401. A known passkey refused (a bad signature, a counter gone back:
 * perhaps a cloned authenticator) is audited as `passkey.refused` in the account signed in to.
 */
export async function signInWithPasskey(
  deps: Pick<Deps, 'store'>,
  call: SignInCall,
  rp: RelyingParty,
  input: { credential: AuthenticationResponseJSON; account_id?: string | undefined },
) {
  const db = deps.store.db;
  const { verifyAuthenticationResponse, isoBase64URL } = await webauthn();
  const challenge = await challengeOf(input.credential.response.clientDataJSON);
  if (!challenge || !(await takeChallenge(db, challenge, 'authentication', null))) {
    throw new UnauthorizedError(REFUSED);
  }
  const passkey = await findPasskeyByCredential(db, input.credential.id);
  const handle = input.credential.response.userHandle;
  if (!passkey || (handle && handle !== isoBase64URL.fromUTF8String(passkey.user_id))) {
    throw new UnauthorizedError(REFUSED);
  }
  const verified = await verifyAuthenticationResponse({
    response: input.credential,
    expectedChallenge: challenge,
    expectedOrigin: rp.origin,
    expectedRPID: rp.id,
    credential: {
      id: passkey.credential_id,
      publicKey: isoBase64URL.toBuffer(passkey.public_key),
      counter: Number(passkey.counter),
      transports: passkey.transports,
    },
    requireUserVerification: true,
  }).catch(() => ({ verified: false as const }));
  const user = await findUser(db, passkey.user_id);
  if (!verified.verified || !user) {
    const membership = user && (await membershipFor(db, user.id, input.account_id));
    if (user && membership) {
      await recordAudit(
        db,
        {
          ...call,
          accountId: membership.account_id,
          tokenId: null,
          name: user.email,
          userId: user.id,
          userEmail: user.email,
        },
        'passkey.refused',
        { id: passkey.id },
      );
    }
    throw new UnauthorizedError(REFUSED);
  }
  const now = new Date();
  return db.transaction().execute(async (trx) => {
    // Another sign-in moved the counter since it was read: this one is a replay of the same count.
    if (!(await usePasskey(trx, passkey.id, passkey.counter, verified.authenticationInfo.newCounter, now))) {
      throw new UnauthorizedError(REFUSED);
    }
    return startSession(trx, call, user, input.account_id, 'session.sign_in_passkey');
  });
}

function membershipFor(db: Db, userId: string, accountId: string | undefined) {
  return accountId ? findMembership(db, accountId, userId) : oldestMembership(db, userId);
}

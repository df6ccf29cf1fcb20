/**
 * OpenID Connect single sign-on per account (docs/sso.md): an owner names the account's provider (issuer,
 * client id and secret), the email domains it signs in, and the role a person gets on their first sign-in.
 * A sign-in is the authorization code flow with PKCE, state and nonce (openid-client checks the provider's
 * answers); its state lives in the database, so any Berth process takes the callback, and works once.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type * as Oidc from 'openid-client';
import {
  deleteSsoConfig,
  findSsoConfig,
  insertSsoFlow,
  pruneSsoFlows,
  ssoConfigsForDomain,
  takeSsoFlow,
  upsertSsoConfig,
} from '../../store/repositories/sso.ts';
import { findUserByEmail, insertUser, joinUnlessMember } from '../../store/repositories/users.ts';
import {
  BusinessRuleError,
  ConflictError,
  type FieldError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
} from '../errors.ts';
import { hashSecret } from '../passwords.ts';
import type { SsoCallback, SsoSettings, SsoStart } from '../sso-inputs.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';
import { type SignInCall, startSession } from './sessions.ts';

/** Between the redirect to the provider and its callback: long enough to type a password and a second factor. */
export const SSO_FLOW_MS = 10 * 60 * 1000;
/** How long a request to the provider may take. */
const PROVIDER_TIMEOUT_S = 10;
/** What Berth asks the provider for: who the person is, and their email. */
const SCOPE = 'openid email profile';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
const DOMAIN =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

/** An issuer is https://, or http:// on this machine only (a provider beside Berth, or a test's). */
function isLoopback(url: URL): boolean {
  return url.protocol === 'http:' && LOOPBACK.has(url.hostname);
}

function settingsProblems(input: SsoSettings, hasSecret: boolean): FieldError[] {
  const problems: FieldError[] = [];
  let issuer: URL | undefined;
  try {
    issuer = new URL(input.issuer_url);
  } catch {
    problems.push({
      field: 'issuer_url',
      error: 'issuer_url must be a URL, such as https://login.example.com',
    });
  }
  if (issuer && issuer.protocol !== 'https:' && !isLoopback(issuer)) {
    problems.push({
      field: 'issuer_url',
      error: 'issuer_url must be an https:// URL (http:// only on localhost)',
    });
  }
  if (issuer && (issuer.search || issuer.hash || issuer.username || issuer.password)) {
    problems.push({ field: 'issuer_url', error: 'issuer_url must have no query, fragment or credentials' });
  }
  input.allowed_domains.forEach((domain, i) => {
    if (!DOMAIN.test(domain.toLowerCase())) {
      problems.push({
        field: `allowed_domains[${i}]`,
        error: 'each allowed domain must be a domain name, such as example.com',
      });
    }
  });
  if (input.default_role === 'owner') {
    // Whoever the provider vouches for would own the account: owners are made by owners, one by one.
    problems.push({ field: 'default_role', error: 'default_role cannot be owner; make owners one by one' });
  }
  if (input.client_secret === undefined && !hasSecret) {
    problems.push({ field: 'client_secret', error: 'client_secret is required the first time' });
  }
  return problems;
}

/** The settings as shown: never the client secret. */
export function ssoView(row: NonNullable<Awaited<ReturnType<typeof findSsoConfig>>>) {
  return {
    issuer_url: row.issuer_url,
    client_id: row.client_id,
    client_secret_set: true,
    allowed_domains: row.allowed_domains,
    default_role: row.default_role,
    enabled: row.enabled,
    updated_at: row.updated_at.toISOString(),
  };
}

/** Where the provider sends the browser back: a console page of this server, one per account. */
export function redirectUriOf(origin: string, accountId: string): string {
  return `${origin}/sso/${accountId}/callback`;
}

export async function readSsoSettings(deps: Pick<Deps, 'store'>, accountId: string) {
  const row = await findSsoConfig(deps.store.db, accountId);
  if (!row) throw new NotFoundError('Single sign-on configuration');
  return ssoView(row);
}

/** Sets the account's provider (owners). The client secret is sealed, as secrets are. */
export async function setSsoSettings(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  actor: Actor,
  input: SsoSettings,
) {
  return deps.store.db.transaction().execute(async (trx) => {
    const existing = await findSsoConfig(trx, actor.accountId);
    const problems = settingsProblems(input, existing !== undefined);
    if (problems.length > 0) throw ValidationError.fields(problems);
    const row = await upsertSsoConfig(trx, {
      account_id: actor.accountId,
      issuer_url: input.issuer_url,
      client_id: input.client_id,
      client_secret_sealed:
        input.client_secret === undefined
          ? (existing?.client_secret_sealed as string)
          : deps.secretBox.seal(input.client_secret),
      allowed_domains: [...new Set(input.allowed_domains.map((d) => d.toLowerCase()))],
      default_role: input.default_role,
      enabled: input.enabled,
    });
    await recordAudit(trx, actor, 'sso.update', { type: 'sso', id: null });
    return ssoView(row);
  });
}

export async function deleteSsoSettings(deps: Pick<Deps, 'store'>, actor: Actor) {
  await deps.store.db.transaction().execute(async (trx) => {
    if (!(await deleteSsoConfig(trx, actor.accountId)))
      throw new NotFoundError('Single sign-on configuration');
    await recordAudit(trx, actor, 'sso.delete', { type: 'sso', id: null });
  });
}

type ConfigRow = NonNullable<Awaited<ReturnType<typeof findSsoConfig>>>;

/**
 * openid-client, with the jose it brings, loads with the first sign-in rather than at every server's
 * start (docs/performance.md, "The embedded start: its collection and its modules").
 */
const openidClient = () => import('openid-client');

/** The provider's metadata (discovery), and a client of it with the account's credentials. */
async function providerOf(deps: Pick<Deps, 'secretBox'>, config: ConfigRow): Promise<Oidc.Configuration> {
  const oidc = await openidClient();
  const issuer = new URL(config.issuer_url);
  return oidc.discovery(
    issuer,
    config.client_id,
    undefined,
    oidc.ClientSecretBasic(deps.secretBox.open(config.client_secret_sealed)),
    {
      timeout: PROVIDER_TIMEOUT_S,
      ...(isLoopback(issuer) ? { execute: [oidc.allowInsecureRequests] } : {}),
    },
  );
}

/** Every message of an error and its causes, for the log (never for an answer: see providerSaid). */
function causeOf(error: unknown): string {
  const messages: string[] = [];
  for (let e: unknown = error; e instanceof Error && messages.length < 4; e = e.cause)
    messages.push(e.message);
  return messages.join(': ') || 'no answer';
}

/**
 * What the provider itself answered (an OAuth error and its description), which the person may read.
 * Anything else (a connection refused, a timeout) stays in the log: the answer goes to people who are not
 * signed in, and must not map the network Berth reaches.
 */
function providerSaid(oidc: typeof Oidc, error: unknown): string | undefined {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof oidc.ResponseBodyError || e instanceof oidc.AuthorizationResponseError) {
      return [e.error, e.error_description].filter(Boolean).join(': ').slice(0, 300);
    }
    // A refused client authentication is answered as a WWW-Authenticate challenge.
    if (e instanceof oidc.WWWAuthenticateChallengeError) {
      const challenge = e.cause[0]?.parameters;
      return (
        [challenge?.error, challenge?.error_description].filter(Boolean).join(': ').slice(0, 300) || undefined
      );
    }
  }
  return undefined;
}

/**
 * Starts a sign-in for this email: the account whose single sign-on takes its domain (or the one named),
 * a flow stored under its state, and the provider's authorization URL to send the browser to. The PKCE
 * verifier is answered for the browser's cookie, and never stored.
 */
export async function startSso(
  deps: Pick<Deps, 'store' | 'secretBox' | 'logger'>,
  input: SsoStart,
  origin: string,
) {
  const domain = input.email.slice(input.email.lastIndexOf('@') + 1).toLowerCase();
  if (!input.email.includes('@') || !DOMAIN.test(domain)) {
    throw ValidationError.fields([
      { field: 'email', error: 'email must be an email address, such as ada@example.com' },
    ]);
  }
  const configs = (await ssoConfigsForDomain(deps.store.db, domain)).filter(
    (c) => input.account_id === undefined || c.account_id === input.account_id,
  );
  const config = configs[0];
  if (!config) throw new NotFoundError(`Single sign-on for ${domain}`);
  if (configs.length > 1) {
    throw new ConflictError(
      `Several accounts sign in ${domain} with single sign-on: use the sign-in link your account's owner shares, which names the account`,
    );
  }
  const oidc = await openidClient();
  let provider: Oidc.Configuration;
  try {
    provider = await providerOf(deps, config);
  } catch (error) {
    deps.logger.warn(
      { accountId: config.account_id, cause: causeOf(error) },
      'single sign-on: discovery failed',
    );
    throw new BusinessRuleError(
      `The identity provider at ${config.issuer_url} could not be reached or answered unexpectedly: ask your account's owner to check the single sign-on settings (Berth's log says why)`,
    );
  }
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const challenge = await oidc.calculatePKCECodeChallenge(verifier);
  const redirectUri = redirectUriOf(origin, config.account_id);
  const now = new Date();
  await pruneSsoFlows(deps.store.db, now);
  await insertSsoFlow(deps.store.db, {
    state_hash: hashSecret(state),
    account_id: config.account_id,
    code_challenge: challenge,
    nonce,
    redirect_uri: redirectUri,
    expires_at: new Date(now.getTime() + SSO_FLOW_MS),
  });
  const url = oidc.buildAuthorizationUrl(provider, {
    redirect_uri: redirectUri,
    scope: SCOPE,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    nonce,
    login_hint: input.email,
  });
  return { authorizationUrl: url.href, verifier, accountId: config.account_id };
}

/** Why a callback was refused: the audit action is `sso.refused_<reason>`. */
type Refusal = 'state' | 'nonce' | 'issuer' | 'audience' | 'provider' | 'email' | 'domain';

const CLAIM_REFUSALS: Record<string, Refusal> = {
  state: 'state',
  nonce: 'nonce',
  iss: 'issuer',
  aud: 'audience',
};

const REFUSED: Record<Refusal, string> = {
  state: 'This sign-in is unknown, used already, expired or was started in another browser',
  nonce: "The identity provider's answer is not for this sign-in (its nonce differs)",
  issuer: "The answer came from another identity provider than this account's (its issuer differs)",
  audience: "The identity provider's answer was made for another application (its audience differs)",
  provider: 'The identity provider did not complete the sign-in',
  email: 'The identity provider has not verified your email address',
  domain: 'Your email domain is not one this account signs in with single sign-on',
};

/** Which check the provider's answer failed, from openid-client's error and its causes. */
function refusalOf(error: unknown): Refusal {
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    const claim = (e.cause as { claim?: unknown } | undefined)?.claim;
    if (typeof claim === 'string' && CLAIM_REFUSALS[claim]) return CLAIM_REFUSALS[claim];
    const named = /"(iss|aud|nonce|state)"/.exec(e.message)?.[1];
    if (named && CLAIM_REFUSALS[named]) return CLAIM_REFUSALS[named];
  }
  return 'provider';
}

/**
 * The provider's callback: the flow its state names (taken: it works once) in the browser that started
 * it, the code exchanged with the PKCE verifier, the ID token's issuer, audience and nonce checked; then a
 * verified email of an allowed domain signs in, made a member with the default role on the first sign-in
 * (an existing member keeps their role). Every refusal is audited in the account, then answered.
 */
export async function finishSso(
  deps: Pick<Deps, 'store' | 'secretBox' | 'logger'>,
  call: SignInCall,
  input: SsoCallback,
  verifier: string | undefined,
) {
  const { db } = deps.store;
  const config = await findSsoConfig(db, input.account_id);
  if (!config?.enabled) throw new UnauthorizedError('Single sign-on is not set up for this account');
  const refuse = async (reason: Refusal, detail?: string, email?: string) => {
    const actor: Actor = {
      ...call,
      accountId: config.account_id,
      tokenId: null,
      name: 'Single sign-on',
      userEmail: email ?? null,
      userAgent: call.userAgent?.slice(0, 400),
    };
    await recordAudit(db, actor, `sso.refused_${reason}`, { type: 'sso', id: null });
    const message = `${REFUSED[reason]}${detail ? ` (${detail})` : ''}: start again from the sign-in page`;
    return reason === 'domain' ? new ForbiddenError(message) : new UnauthorizedError(message);
  };

  const oidc = await openidClient();
  const flow = await takeSsoFlow(db, config.account_id, hashSecret(input.state));
  if (!flow || !verifier || (await oidc.calculatePKCECodeChallenge(verifier)) !== flow.code_challenge) {
    throw await refuse('state');
  }
  if (input.error !== undefined) throw await refuse('provider', input.error_description ?? input.error);
  const callbackUrl = new URL(flow.redirect_uri);
  for (const name of ['code', 'state', 'iss'] as const) {
    const value = input[name];
    if (value !== undefined) callbackUrl.searchParams.set(name, value);
  }
  let claims: Record<string, unknown>;
  try {
    const provider = await providerOf(deps, config);
    const tokens = await oidc.authorizationCodeGrant(provider, callbackUrl, {
      pkceCodeVerifier: verifier,
      expectedState: input.state,
      expectedNonce: flow.nonce,
      idTokenExpected: true,
    });
    const idToken = tokens.claims() as Record<string, unknown> & { sub: string };
    // Many providers answer the email at the userinfo endpoint only, not in the ID token.
    claims =
      typeof idToken.email === 'string'
        ? idToken
        : { ...(await oidc.fetchUserInfo(provider, tokens.access_token, idToken.sub)), ...idToken };
  } catch (error) {
    const reason = refusalOf(error);
    if (reason === 'provider') {
      deps.logger.warn(
        { accountId: config.account_id, cause: causeOf(error) },
        'single sign-on: callback failed',
      );
    }
    throw await refuse(reason, reason === 'provider' ? providerSaid(oidc, error) : undefined);
  }
  const email = typeof claims.email === 'string' ? claims.email : undefined;
  if (!email || claims.email_verified !== true) throw await refuse('email', undefined, email);
  const domain = email.slice(email.lastIndexOf('@') + 1).toLowerCase();
  if (!config.allowed_domains.includes(domain)) throw await refuse('domain', domain, email);

  return db.transaction().execute(async (trx) => {
    const name =
      typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim().slice(0, 100) : undefined;
    const user =
      (await findUserByEmail(trx, email)) ??
      (await insertUser(trx, {
        id: randomUUID(),
        email,
        display_name: name ?? email.split('@')[0] ?? email,
      }));
    if (
      await joinUnlessMember(trx, {
        user_id: user.id,
        account_id: config.account_id,
        role: config.default_role,
      })
    ) {
      const actor: Actor = {
        ...call,
        accountId: config.account_id,
        tokenId: null,
        name: user.email,
        userId: user.id,
        userEmail: user.email,
        userAgent: call.userAgent?.slice(0, 400),
      };
      await recordAudit(trx, actor, 'member.join_sso', { type: 'member', id: user.id });
    }
    return startSession(trx, call, user, config.account_id, 'session.sign_in_sso');
  });
}

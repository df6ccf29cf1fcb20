import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider, { type KoaContext } from 'oidc-provider';

/** Who the provider says signed in, by the login typed on its page. */
export interface ProviderUser {
  email: string;
  email_verified: boolean;
  name?: string;
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Logins the provider knows; any other login is its own email, verified. */
  users: Map<string, ProviderUser>;
  /**
   * Changes the claims of the next ID token the token endpoint answers, re-signed with the provider's own
   * key: a provider (or a mix-up) answering for another issuer, audience or nonce.
   */
  tamperNextIdToken(change: (claims: Record<string, unknown>) => void): void;
  /**
   * A browser's way through the provider without a browser: follows its redirects with its cookies, types
   * `login` on its sign-in page, and answers the URL the provider sends the browser back to.
   */
  signIn(authorizationUrl: string, login: string): Promise<URL>;
  close(): Promise<void>;
}

/** The provider's sign-in page: one field, one button (the browser test types into it). */
function loginPage(uid: string, hint: unknown): string {
  const value = typeof hint === 'string' ? hint.replace(/[^\w@.+-]/g, '') : '';
  return `<!doctype html><html><head><title>Test identity provider</title></head>
<body style="font-family:sans-serif;max-width:24rem;margin:4rem auto">
<h1>Test identity provider</h1>
<form method="post" action="/interaction/${uid}/login">
<label>Login <input name="login" value="${value}" autofocus></label>
<button type="submit">Continue</button>
</form></body></html>`;
}

async function formOf(req: http.IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/**
 * A real OpenID Connect provider (oidc-provider) on loopback, with one confidential client whose redirect
 * URIs are given: discovery, authorization code with PKCE, ID tokens signed with a key made here,
 * userinfo (the email claims are answered there, as many providers do, not in the ID token).
 */
export async function startOidcProvider(redirectUris: string[]): Promise<TestProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = randomUUID();
  const jwk: JWK = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  const clientId = `berth-${randomUUID().slice(0, 8)}`;
  const clientSecret = randomUUID();
  const users = new Map<string, ProviderUser>();
  let tamper: ((claims: Record<string, unknown>) => void) | null = null;

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomUUID()] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: { devInteractions: { enabled: false } },
    // Set, rather than the defaults' functions, which log a notice each first use.
    ttl: {
      Interaction: 600,
      Session: 600,
      Grant: 600,
      AccessToken: 600,
      IdToken: 600,
      AuthorizationCode: 60,
    },
    findAccount: async (_ctx: unknown, sub: string) => ({
      accountId: sub,
      claims: async () => ({ sub, ...(users.get(sub) ?? { email: sub, email_verified: true }) }),
    }),
    // First-party: no consent screen; the grant is made on the first sign-in.
    loadExistingGrant: async (ctx: KoaContext) => {
      const existing =
        ctx.oidc.result?.consent?.grantId ?? ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (existing) return provider.Grant.find(existing);
      const grant = new provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });

  provider.use(async (ctx, next) => {
    // A browser asks for the page's icon: none, rather than a 404 it would report.
    if (ctx.path === '/favicon.ico') {
      ctx.status = 204;
      return;
    }
    const interaction = /^\/interaction\/([\w-]+)(\/login)?$/.exec(ctx.path);
    if (!interaction) {
      await next();
      const body = ctx.body as { id_token?: string } | undefined;
      if (ctx.path === '/token' && tamper && body?.id_token) {
        const claims = decodeJwt(body.id_token) as Record<string, unknown>;
        tamper(claims);
        tamper = null;
        body.id_token = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(privateKey);
      }
      return;
    }
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (ctx.method === 'POST' && interaction[2]) {
      const login = (await formOf(ctx.req)).get('login') ?? '';
      ctx.redirect(
        await provider.interactionResult(
          ctx.req,
          ctx.res,
          { login: { accountId: login } },
          { mergeWithLastSubmission: false },
        ),
      );
      return;
    }
    ctx.type = 'html';
    ctx.body = loginPage(details.uid, details.params.login_hint);
  });
  server.on('request', provider.callback());

  return {
    issuer,
    clientId,
    clientSecret,
    users,
    tamperNextIdToken(change) {
      tamper = change;
    },
    async signIn(authorizationUrl, login) {
      const jar = new Map<string, string>();
      const cookies = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      let url = new URL(authorizationUrl);
      let init: RequestInit = {};
      for (let hop = 0; hop < 10; hop++) {
        const res = await fetch(url, {
          ...init,
          redirect: 'manual',
          headers: { ...init.headers, cookie: cookies() },
        });
        for (const set of res.headers.getSetCookie()) {
          const [pair] = set.split(';');
          const at = pair?.indexOf('=') ?? -1;
          if (pair && at > 0) jar.set(pair.slice(0, at), pair.slice(at + 1));
        }
        const location = res.headers.get('location');
        if (location) {
          await res.arrayBuffer();
          const next = new URL(location, url);
          if (next.origin !== issuer) return next;
          url = next;
          init = {};
          continue;
        }
        const page = await res.text();
        assert.equal(res.status, 200, page);
        assert.match(url.pathname, /^\/interaction\//, page);
        url = new URL(`${url.pathname}/login`, url);
        init = {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ login }).toString(),
        };
      }
      throw new Error('the provider never sent the browser back');
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

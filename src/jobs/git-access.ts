import { createPrivateKey } from 'node:crypto';
import { type GitAccess, githubApiUrl } from '../domain/git-auth.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { findGitConnectionById } from '../store/repositories/git-connections.ts';
import type { GitConnectionRow, ServiceRow } from '../store/schema.ts';
import { TerminalError } from './errors.ts';

/**
 * Installation tokens by connection: GitHub's last an hour, so one is reused until five minutes before
 * it expires instead of minting one per deployment (GitHub rate-limits the minting).
 */
const minted = new Map<string, { token: string; expiresAt: number }>();
const REUSE_MARGIN_MS = 5 * 60_000;

/**
 * A GitHub App installation token: a JWT signed with the App's private key (RS256, issued a minute in
 * the past for clock drift, valid nine minutes: GitHub allows ten) exchanged at the host's API.
 */
async function installationToken(connection: GitConnectionRow, privateKey: string): Promise<string> {
  const cached = minted.get(connection.id);
  if (cached && cached.expiresAt - REUSE_MARGIN_MS > Date.now()) return cached.token;
  // jose loads with the first GitHub App token, not with every server's start.
  const { SignJWT } = await import('jose');
  const now = Math.floor(Date.now() / 1000);
  const jwt = await new SignJWT({})
    .setProtectedHeader({ alg: 'RS256' })
    .setIssuedAt(now - 60)
    .setExpirationTime(now + 540)
    .setIssuer(connection.github_app_id ?? '')
    .sign(createPrivateKey(privateKey));
  const url = `${githubApiUrl(connection.base_url)}/app/installations/${connection.github_installation_id}/access_tokens`;
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${jwt}`,
      accept: 'application/vnd.github+json',
      'user-agent': 'berth',
    },
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) {
    const refusal = `GitHub refused an installation token for connection ${connection.name} (HTTP ${response.status}): check the App id, installation id and private key`;
    // A 5xx or a rate limit may pass; a refusal of the App's credential will not.
    if (response.status >= 500 || response.status === 429) throw new Error(refusal);
    throw new TerminalError(refusal);
  }
  const body = (await response.json()) as { token?: string; expires_at?: string };
  if (!body.token) throw new Error(`GitHub answered no installation token for connection ${connection.name}`);
  minted.set(connection.id, {
    token: body.token,
    expiresAt: body.expires_at ? Date.parse(body.expires_at) : Date.now() + 3_600_000,
  });
  return body.token;
}

/**
 * How the provider reads a git service's repository: with its connection's credential (a token, or an
 * installation token minted for a GitHub App), or anonymously when it names no connection.
 */
export async function gitAccessOf(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  service: Pick<ServiceRow, 'account_id' | 'source' | 'installation_id'>,
): Promise<GitAccess | undefined> {
  if (!service.installation_id || (service.source !== 'github' && service.source !== 'gitlab'))
    return undefined;
  const connection = await findGitConnectionById(deps.store.db, service.installation_id);
  if (!connection || connection.account_id !== service.account_id || connection.kind !== service.source) {
    throw new TerminalError(
      `Connection not found: the service's installation_id ${service.installation_id} names no ${service.source} connection of its account`,
    );
  }
  const secret = deps.secretBox.open(connection.secret_sealed);
  const password =
    connection.credential === 'github_app' ? await installationToken(connection, secret) : secret;
  // GitHub takes any user name with a token (x-access-token by convention); GitLab wants oauth2.
  return {
    baseUrl: connection.base_url,
    username: connection.kind === 'gitlab' ? 'oauth2' : 'x-access-token',
    password,
  };
}

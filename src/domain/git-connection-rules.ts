import { createPrivateKey } from 'node:crypto';
import type { FieldError } from './errors.ts';
import type { GitConnectionInput } from './inputs.ts';

export const DEFAULT_GIT_BASE_URLS = { github: 'https://github.com', gitlab: 'https://gitlab.com' } as const;

const APP_FIELDS = ['github_app_id', 'github_installation_id', 'private_key'] as const;

/** The base URL without a trailing slash, or why it cannot be one. */
export function normalBaseUrl(text: string): { url: string } | { error: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { error: 'base_url must be an http(s) URL such as https://github.example.com' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return { error: 'base_url must be an http(s) URL such as https://github.example.com' };
  // The credential travels in a header, never in the URL (where logs and git's config would keep it).
  if (url.username || url.password) return { error: 'base_url must not hold a user name or password' };
  if (url.search || url.hash) return { error: 'base_url must not have a query or fragment' };
  return { url: `${url.origin}${url.pathname.replace(/\/+$/, '')}` };
}

/**
 * What a connection's body must hold beyond its shape: a GitHub connection authenticates as an App
 * (all three App fields) or with a token, not both; a GitLab one with a token. A private key must be
 * one Node can sign with (PKCS#1, as GitHub hands it out, or PKCS#8).
 */
export function checkGitConnection(input: GitConnectionInput): FieldError[] {
  const errors: FieldError[] = [];
  const appGiven = APP_FIELDS.filter((f) => input[f] !== undefined);
  if (input.kind === 'gitlab') {
    for (const field of appGiven) errors.push({ field, error: `${field} is for github connections only` });
    if (input.token === undefined) errors.push({ field: 'token', error: 'token is a required field' });
  } else if (input.token !== undefined && appGiven.length > 0) {
    errors.push({ field: 'token', error: 'give a token or the GitHub App fields, not both' });
  } else if (input.token === undefined) {
    for (const field of APP_FIELDS) {
      if (input[field] === undefined)
        errors.push({ field, error: `${field} is a required field (or give a token instead of an App)` });
    }
  }
  if (input.private_key !== undefined && !errors.some((e) => e.field === 'private_key')) {
    try {
      createPrivateKey(input.private_key);
    } catch {
      errors.push({
        field: 'private_key',
        error: 'private_key must be a PEM private key (the App key GitHub generated)',
      });
    }
  }
  if (input.base_url !== undefined) {
    const base = normalBaseUrl(input.base_url);
    if ('error' in base) errors.push({ field: 'base_url', error: base.error });
  }
  return errors;
}

/** A private key Node can sign with (PKCS#1, as GitHub hands it out, or PKCS#8). */
function privateKeyErrors(pem: string): FieldError[] {
  try {
    createPrivateKey(pem);
    return [];
  } catch {
    return [
      { field: 'private_key', error: 'private_key must be a PEM private key (the App key GitHub generated)' },
    ];
  }
}

/** A rotation gives the secret of the connection's own credential: a token, or an App's private key. */
export function checkGitConnectionChange(
  credential: 'github_app' | 'token',
  change: { private_key?: string | undefined; token?: string | undefined },
): FieldError[] {
  if (credential === 'token' && change.private_key !== undefined)
    return [{ field: 'private_key', error: 'this connection authenticates with a token: give token' }];
  if (credential === 'github_app' && change.token !== undefined)
    return [{ field: 'token', error: 'this connection authenticates as a GitHub App: give private_key' }];
  return change.private_key === undefined ? [] : privateKeyErrors(change.private_key);
}

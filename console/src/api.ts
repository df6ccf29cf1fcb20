import { ApiError, type BerthClient, createClient, UnreachableError } from '../../src/client/index.ts';
import { clearToken, getCsrf, getToken } from './session.ts';

export type { BerthClient, paths } from '../../src/client/index.ts';
export { ApiError, unwrap } from '../../src/client/index.ts';

/** The console talks to the server that served it, through the same typed client as any caller. */
export function clientFor(token: string): BerthClient {
  return createClient({ baseUrl: location.origin, token, retry: { attempts: 3 } });
}

export function api(): BerthClient {
  const token = getToken();
  if (token) return clientFor(token);
  const csrf = getCsrf();
  if (!csrf) throw new ApiError(401, { error_code: 'unauthorized', message: 'Sign in first' });
  return createClient({ baseUrl: location.origin, token: null, csrfToken: csrf, retry: { attempts: 3 } });
}

/** A call of the sign-in routes (/auth, outside the typed /v1 client): the `data`, or an ApiError. */
export async function auth<T>(path: string, body?: unknown, csrf?: string): Promise<T> {
  const res = await fetch(`/auth${path}`, {
    method: body === undefined && !csrf ? 'GET' : 'POST',
    headers: {
      ...(body !== undefined && { 'content-type': 'application/json' }),
      ...(csrf && { 'x-csrf-token': csrf }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json().catch(() => ({}))) as { data?: T };
  if (!res.ok) throw new ApiError(res.status, json);
  return json.data as T;
}

export interface SignedIn {
  session_id: string;
  csrf_token: string;
  user: { id: string; email: string };
  account_id: string;
  role: string;
}

export type FieldErrors = Record<string, string>;

/** The API's field errors keyed by field (the first error of each field). */
export function fieldErrorsOf(error: unknown): FieldErrors {
  const out: FieldErrors = {};
  if (error instanceof ApiError) {
    for (const e of error.body.errors ?? []) out[e.field] ??= e.error;
  }
  return out;
}

/** What to tell the user about a failed call: the API's own message, with what to do when it is ours to say. */
export function messageOf(error: unknown): string {
  if (error instanceof ApiError) {
    if (error.status === 401)
      return 'You are signed out (your session or API token was not accepted): sign in again.';
    if (error.status === 403) return `Not allowed: ${error.message}`;
    if (error.status === 404) return 'Not found: it may have been deleted, or belongs to another account.';
    if (error.status === 429) return 'Too many requests: wait a minute, then try again.';
    return error.message;
  }
  if (error instanceof UnreachableError) return `${error.message}. Is berth serve still running?`;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** A 401 means the token is gone or revoked: back to sign-in. */
export function isSignedOut(error: unknown): boolean {
  if (error instanceof ApiError && error.status === 401) {
    clearToken();
    return true;
  }
  return false;
}

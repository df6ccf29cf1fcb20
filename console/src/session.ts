/**
 * How this tab is signed in: an API token pasted here, or a person's session (its cookie is HttpOnly, so
 * the tab keeps only the session's CSRF token, which every write sends). Both live in this tab's session
 * storage only: nothing is on disk but the cookie.
 */
const KEY = 'berth.token';
const CSRF = 'berth.csrf';

export function getToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function getCsrf(): string | null {
  return sessionStorage.getItem(CSRF);
}

export function setCsrf(csrf: string): void {
  sessionStorage.setItem(CSRF, csrf);
}

export function isSignedIn(): boolean {
  return getToken() !== null || getCsrf() !== null;
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(CSRF);
}

const RETURN = 'berth.return';

/** A page reached signed out that sign-in should come back to (the device login page a link opened). */
export function rememberReturn(route: string): void {
  sessionStorage.setItem(RETURN, route);
}

/** The page to show after signing in, once; null: none was remembered. */
export function takeReturn(): string | null {
  const route = sessionStorage.getItem(RETURN);
  sessionStorage.removeItem(RETURN);
  return route;
}

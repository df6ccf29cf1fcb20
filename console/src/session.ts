/** The API token lives in this tab's session only: closing the tab signs out, and nothing is on disk. */
const KEY = 'berth.token';

export function getToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
}

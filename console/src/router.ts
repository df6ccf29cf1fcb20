import { useEffect, useState } from 'preact/hooks';

/**
 * Routes live in the URL's fragment (`#/envs/...`): the server serves one page at `/` and never needs
 * to know the console's routes.
 */
export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const onChange = () => setRoute(currentRoute());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

function currentRoute(): string {
  return location.hash.replace(/^#/, '') || '/';
}

export function navigate(route: string): void {
  location.hash = route;
}

/** `match('/envs/:envId', '/envs/abc')` -> `{envId: 'abc'}`, or null. */
export function match(pattern: string, route: string): Record<string, string> | null {
  const p = pattern.split('/');
  const r = route.split('?')[0]?.split('/') ?? [];
  if (p.length !== r.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    const part = p[i] as string;
    const value = r[i] as string;
    if (part.startsWith(':')) {
      if (!value) return null;
      params[part.slice(1)] = decodeURIComponent(value);
    } else if (part !== value) return null;
  }
  return params;
}

export const href = (route: string) => `#${route}`;

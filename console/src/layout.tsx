import type { ComponentChildren } from 'preact';
import { navigate } from './router.ts';
import { clearToken } from './session.ts';

export function signOut(): void {
  clearToken();
  navigate('/sign-in');
}

export function Layout(props: { children: ComponentChildren }) {
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="#/envs">
          Berth
        </a>
        <nav aria-label="Main">
          <a href="#/envs">Environments</a>
          <a href="#/audit">Audit log</a>
          <button type="button" class="link" onClick={signOut}>
            Sign out
          </button>
        </nav>
      </header>
      <main id="main">{props.children}</main>
    </>
  );
}

import type { ComponentChildren } from 'preact';
import { auth } from './api.ts';
import { navigate } from './router.ts';
import { clearToken, getCsrf } from './session.ts';

/** Forgets the token, or ends the session (its cookie then works nowhere), and goes to sign-in. */
export async function signOut(): Promise<void> {
  const csrf = getCsrf();
  if (csrf) await auth('/sign-out', {}, csrf).catch(() => {});
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
          <a href="#/webhooks">Webhooks</a>
          <a href="#/people">Sessions and people</a>
          <a href="#/tokens">API tokens</a>
          <a href="#/sso">Single sign-on</a>
          <button type="button" class="link" onClick={() => void signOut()}>
            Sign out
          </button>
        </nav>
      </header>
      <main id="main">{props.children}</main>
    </>
  );
}

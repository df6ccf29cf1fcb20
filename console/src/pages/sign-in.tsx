import { useEffect, useState } from 'preact/hooks';
import { ApiError, auth, clientFor, messageOf, type SignedIn, unwrap } from '../api.ts';
import { navigate } from '../router.ts';
import { setCsrf, setToken, takeReturn } from '../session.ts';
import { TextField, useSubmit } from '../ui.tsx';
import { PasskeySignIn } from './passkeys.tsx';
import { SsoSignIn } from './sso.tsx';

/** A refused token here is not a session that ended: say what to check, not to sign in again. */
function signInMessage(error: unknown): string {
  if (error instanceof ApiError && error.status === 401)
    return 'This token was not accepted. Paste the whole token that berth serve printed on its first start (no spaces cut off), or make a new one with berth admin tokens issue <account id>.';
  return messageOf(error);
}

function passwordMessage(error: unknown): string {
  if (error instanceof ApiError && error.status === 401) return 'The email or the password is wrong.';
  return messageOf(error);
}

/** Signed in as a person: the tab keeps the session's CSRF token (the cookie itself is out of reach). */
export function signedInAs(s: SignedIn): void {
  setCsrf(s.csrf_token);
  navigate(takeReturn() ?? '/envs');
}

export function SignIn() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [token, setTokenValue] = useState('');
  // A session cookie from before (another tab, a reload): carry on signed in.
  useEffect(() => {
    auth<SignedIn | null>('/session').then(
      (s) => s && signedInAs(s),
      () => {},
    );
  }, []);
  const withPassword = useSubmit(async () => {
    if (!email.trim() || !password) throw new Error('Enter your email and your password');
    return auth<SignedIn>('/sign-in', { email: email.trim(), password });
  }, signedInAs);
  const withToken = useSubmit(
    async () => {
      const trimmed = token.trim();
      if (!trimmed) throw new Error('Paste the API token that berth serve printed on its first start');
      // Checked against the API before it is kept: a typo is told at once.
      unwrap(await clientFor(trimmed).GET('/v1/environments'));
      return trimmed;
    },
    (checked) => {
      setToken(checked);
      navigate('/envs');
    },
  );
  return (
    <main id="main" class="sign-in">
      <h1 id="page-title" tabIndex={-1}>
        Sign in to Berth
      </h1>
      <form onSubmit={withPassword.run} noValidate>
        <TextField
          id="email"
          label="Email"
          value={email}
          onInput={setEmail}
          attrs={{ autoComplete: 'username', spellcheck: false }}
        />
        <TextField
          id="password"
          label="Password"
          type="password"
          value={password}
          onInput={setPassword}
          error={withPassword.error ? passwordMessage(withPassword.error) : undefined}
          attrs={{ autoComplete: 'current-password' }}
        />
        <button type="submit" class="primary" disabled={withPassword.busy}>
          {withPassword.busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <PasskeySignIn onSignedIn={signedInAs} />
      <SsoSignIn />
      <h2>Sign in with an API token</h2>
      <form onSubmit={withToken.run} noValidate>
        <TextField
          id="token"
          label="API token"
          type="password"
          value={token}
          onInput={setTokenValue}
          error={withToken.error ? signInMessage(withToken.error) : undefined}
          hint="berth serve prints one on its first start; berth admin tokens issue makes another. It stays in this browser tab only."
          attrs={{ autoComplete: 'off', spellcheck: false }}
        />
        <button type="submit" disabled={withToken.busy}>
          {withToken.busy ? 'Signing in…' : 'Sign in with the token'}
        </button>
      </form>
    </main>
  );
}

/** An invitation or a one-time sign-in link: choose a password, and be signed in. */
export function SetPassword(props: { kind: 'invitation' | 'link' }) {
  const token = new URLSearchParams(location.hash.split('?')[1] ?? '').get('token') ?? '';
  const [password, setPassword] = useState('');
  const [name, setName] = useState('');
  const invitation = props.kind === 'invitation';
  const submit = useSubmit(
    async () =>
      invitation
        ? auth<SignedIn>('/accept-invitation', {
            token,
            password,
            ...(name.trim() && { display_name: name.trim() }),
          })
        : auth<SignedIn>('/sign-in-link', { token, password }),
    signedInAs,
  );
  const refused =
    submit.error instanceof ApiError && submit.error.status === 401
      ? invitation
        ? 'This invitation is unknown, accepted already or expired, or (if you have a Berth password already) that password is wrong. Ask for a new invitation.'
        : 'This link is unknown, used already or expired: ask the operator for a new one.'
      : undefined;
  return (
    <main id="main" class="sign-in">
      <h1 id="page-title" tabIndex={-1}>
        {invitation ? 'Accept your invitation to Berth' : 'Set your Berth password'}
      </h1>
      <form onSubmit={submit.run} noValidate>
        {invitation && (
          <TextField
            id="display_name"
            label="Your name"
            value={name}
            onInput={setName}
            attrs={{ autoComplete: 'name' }}
          />
        )}
        <TextField
          id="new-password"
          label="Password"
          type="password"
          value={password}
          onInput={setPassword}
          error={submit.errors.password ?? refused ?? (submit.error ? messageOf(submit.error) : undefined)}
          hint="At least 12 characters. If you have a Berth password already, enter that one."
          attrs={{ autoComplete: 'new-password' }}
        />
        <button type="submit" class="primary" disabled={submit.busy}>
          {submit.busy ? 'Signing in…' : invitation ? 'Accept and sign in' : 'Set password and sign in'}
        </button>
      </form>
    </main>
  );
}

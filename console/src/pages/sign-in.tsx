import { useState } from 'preact/hooks';
import { ApiError, clientFor, messageOf, unwrap } from '../api.ts';
import { navigate } from '../router.ts';
import { setToken } from '../session.ts';
import { TextField, useSubmit } from '../ui.tsx';

/** A refused token here is not a session that ended: say what to check, not to sign in again. */
function signInMessage(error: unknown): string {
  if (error instanceof ApiError && error.status === 401)
    return 'This token was not accepted. Paste the whole token that berth serve printed on its first start (no spaces cut off), or make a new one with berth admin tokens issue <account id>.';
  return messageOf(error);
}

export function SignIn() {
  const [token, setTokenValue] = useState('');
  const signIn = useSubmit(
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
      <form onSubmit={signIn.run} noValidate>
        <TextField
          id="token"
          label="API token"
          type="password"
          value={token}
          onInput={setTokenValue}
          error={signIn.error ? signInMessage(signIn.error) : undefined}
          hint="berth serve prints one on its first start; berth admin tokens issue makes another. It stays in this browser tab only."
          attrs={{ autoComplete: 'off', spellcheck: false }}
        />
        <button type="submit" class="primary" disabled={signIn.busy}>
          {signIn.busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

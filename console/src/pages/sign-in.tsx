import { useState } from 'preact/hooks';
import { clientFor, messageOf, unwrap } from '../api.ts';
import { navigate } from '../router.ts';
import { setToken } from '../session.ts';
import { TextField } from '../ui.tsx';

export function SignIn() {
  const [token, setTokenValue] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const trimmed = token.trim();
    if (!trimmed) {
      setError('Paste the API token that berth serve printed on its first start.');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      // Checked against the API before it is kept: a typo is told at once.
      unwrap(await clientFor(trimmed).GET('/v1/environments'));
      setToken(trimmed);
      navigate('/envs');
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="sign-in">
      <h1 id="page-title" tabIndex={-1}>
        Sign in to Berth
      </h1>
      <form onSubmit={submit} noValidate>
        <TextField
          id="token"
          label="API token"
          type="password"
          value={token}
          onInput={setTokenValue}
          error={error}
          hint="berth serve prints one on its first start; berth admin tokens issue makes another. It stays in this browser tab only."
          attrs={{ autoComplete: 'off', spellcheck: false }}
        />
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

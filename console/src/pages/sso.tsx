import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, auth, messageOf, type SignedIn, unwrap } from '../api.ts';
import { setCsrf, takeReturn } from '../session.ts';
import {
  CheckboxField,
  CopyButton,
  ErrorBox,
  Loading,
  Page,
  SelectField,
  TextField,
  useLoad,
  useSubmit,
} from '../ui.tsx';

/**
 * Single sign-on (docs/sso.md): the sign-in page's "Sign in with SSO" (the email's domain picks the
 * account; a link naming the account, `#/sign-in?account=<id>`, picks it when several take the domain),
 * the page the provider sends the browser back to, and the owner's settings.
 */

/** Where the provider sends the browser back: `/sso/<account id>/callback` (a real path, served by Berth). */
export function ssoCallbackAccount(): string | null {
  return /^\/sso\/([0-9a-f-]{36})\/callback$/.exec(location.pathname)?.[1] ?? null;
}

/** On the sign-in page: the provider's page for this work email. */
export function SsoSignIn() {
  const [email, setEmail] = useState('');
  const accountId = new URLSearchParams(location.hash.split('?')[1] ?? '').get('account');
  const start = useSubmit(
    async () => {
      if (!email.trim().includes('@'))
        throw new Error('Enter your work email: its domain picks your account');
      return auth<{ authorization_url: string }>('/sso/start', {
        email: email.trim(),
        ...(accountId && { account_id: accountId }),
      });
    },
    (started) => location.assign(started.authorization_url),
  );
  const message =
    start.error instanceof ApiError && start.error.status === 404
      ? 'No account signs in this email domain with single sign-on. Use your password, or ask your account owner.'
      : start.error
        ? messageOf(start.error)
        : undefined;
  return (
    <>
      <h2>Sign in with single sign-on</h2>
      <form onSubmit={start.run} noValidate>
        <TextField
          id="sso-email"
          label="Work email"
          value={email}
          onInput={setEmail}
          error={start.errors.email ?? message}
          hint="Your company's identity provider signs you in; your first sign-in makes you a member."
          attrs={{ autoComplete: 'email', spellcheck: false }}
        />
        <button type="submit" disabled={start.busy}>
          {start.busy ? 'Opening your identity provider…' : 'Sign in with SSO'}
        </button>
      </form>
    </>
  );
}

/** The provider's answer, handed to Berth once; then the console, signed in, or what went wrong. */
export function SsoCallback(props: { accountId: string }) {
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    const query = new URLSearchParams(location.search);
    const body: Record<string, string> = { account_id: props.accountId };
    for (const name of ['state', 'code', 'iss', 'error', 'error_description']) {
      const value = query.get(name);
      if (value) body[name] = value;
    }
    auth<SignedIn>('/sso/callback', body).then((signedIn) => {
      setCsrf(signedIn.csrf_token);
      // The code and state leave the address bar and the history; a device login link opened signed
      // out is where the person goes back to.
      location.replace(`/#${takeReturn() ?? '/envs'}`);
    }, setError);
  }, [props.accountId]);
  return (
    <main id="main" class="sign-in">
      <h1 id="page-title" tabIndex={-1}>
        {error ? 'Single sign-on did not complete' : 'Signing you in…'}
      </h1>
      {error !== undefined && (
        <>
          <div class="error-box" role="alert">
            <p>{error instanceof ApiError ? error.message : messageOf(error)}</p>
          </div>
          <p>
            <a href="/#/sign-in">Back to sign-in</a>
          </p>
        </>
      )}
    </main>
  );
}

const DEFAULT_ROLES = ['viewer', 'developer', 'admin'] as const;

/** The owner's settings: the provider, the email domains it signs in, the role people join with. */
export function SsoSettings() {
  const current = useLoad(async () => {
    const res = await api().GET('/v1/sso');
    if (res.response.status === 404) return null;
    return unwrap(res).sso;
  }, []);
  const [issuer, setIssuer] = useState('');
  const [clientId, setClientId] = useState('');
  const [secret, setSecret] = useState('');
  const [domains, setDomains] = useState('');
  const [role, setRole] = useState<(typeof DEFAULT_ROLES)[number]>('viewer');
  const [enabled, setEnabled] = useState(true);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    const s = current.data;
    if (!s) return;
    setIssuer(s.issuer_url);
    setClientId(s.client_id);
    setDomains(s.allowed_domains.join(', '));
    setRole(s.default_role === 'owner' ? 'admin' : s.default_role);
    setEnabled(s.enabled);
  }, [current.data]);
  const save = useSubmit(
    async () =>
      unwrap(
        await api().PUT('/v1/sso', {
          body: {
            issuer_url: issuer.trim(),
            client_id: clientId.trim(),
            ...(secret && { client_secret: secret }),
            allowed_domains: domains.split(/[\s,]+/).filter(Boolean),
            default_role: role,
            enabled,
          },
        }),
      ),
    () => {
      setSecret('');
      setSaved(true);
      current.reload();
    },
  );
  const remove = useSubmit(async () => unwrap(await api().DELETE('/v1/sso')), current.reload);
  if (current.error) {
    return (
      <Page title="Single sign-on">
        <ErrorBox error={current.error} onRetry={current.reload} />
      </Page>
    );
  }
  if (current.loading && current.data === undefined) {
    return (
      <Page title="Single sign-on">
        <Loading what="the single sign-on settings" />
      </Page>
    );
  }
  const s = current.data;
  const redirectUri = s?.redirect_uri;
  const fieldError = (name: string) => save.errors[name];
  const domainError = Object.entries(save.errors).find(([f]) => f.startsWith('allowed_domains'))?.[1];
  return (
    <Page title="Single sign-on">
      <p>
        People sign in through your OpenID Connect identity provider; a verified email of an allowed domain
        becomes a member with the default role on its first sign-in.
      </p>
      {s && (
        <dl class="facts">
          <dt>Redirect URI (register it at your provider)</dt>
          <dd>
            <code>{redirectUri}</code> <CopyButton text={redirectUri ?? ''} label="the redirect URI" />
          </dd>
          <dt>Sign-in link naming this account</dt>
          <dd>
            <code>{s.sign_in_url}</code> <CopyButton text={s.sign_in_url} label="the sign-in link" />
          </dd>
          <dt>State</dt>
          <dd>{s.enabled ? 'Enabled' : 'Disabled'}</dd>
        </dl>
      )}
      <form class="card" onSubmit={save.run} noValidate>
        <TextField
          id="issuer_url"
          label="Issuer URL"
          value={issuer}
          onInput={setIssuer}
          error={fieldError('issuer_url')}
          hint="Such as https://login.example.com/realms/main; Berth reads its /.well-known/openid-configuration."
          attrs={{ spellcheck: false }}
        />
        <TextField
          id="client_id"
          label="Client ID"
          value={clientId}
          onInput={setClientId}
          error={fieldError('client_id')}
          attrs={{ spellcheck: false }}
        />
        <TextField
          id="client_secret"
          label="Client secret"
          type="password"
          value={secret}
          onInput={setSecret}
          error={fieldError('client_secret')}
          hint={
            s
              ? 'Stored sealed and never shown. Leave empty to keep it.'
              : 'Stored sealed and never shown again.'
          }
          attrs={{ autoComplete: 'off' }}
        />
        <TextField
          id="allowed_domains"
          label="Allowed email domains"
          value={domains}
          onInput={setDomains}
          error={domainError}
          hint="Comma-separated, such as example.com, example.org. Exact: example.com does not take sub.example.com."
          attrs={{ spellcheck: false }}
        />
        <SelectField
          id="default_role"
          label="Default role for new members"
          value={role}
          options={DEFAULT_ROLES}
          onChange={(v) => setRole(v as (typeof DEFAULT_ROLES)[number])}
          error={fieldError('default_role')}
        />
        <CheckboxField id="enabled" label="Enabled" checked={enabled} onChange={setEnabled} />
        {save.error !== undefined && !Object.keys(save.errors).length && <ErrorBox error={save.error} />}
        {saved && !save.error && <p role="status">Saved.</p>}
        <button type="submit" class="primary" disabled={save.busy}>
          {save.busy ? 'Saving…' : 'Save'}
        </button>
      </form>
      {s && (
        <>
          <h2>Remove single sign-on</h2>
          <p>Members keep their memberships and sessions; nobody signs in through the provider anymore.</p>
          {remove.error !== undefined && <ErrorBox error={remove.error} />}
          <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run()}>
            Remove single sign-on
          </button>
        </>
      )}
    </Page>
  );
}

import { useState } from 'preact/hooks';
import { ApiError, api, messageOf, unwrap } from '../api.ts';
import { navigate } from '../router.ts';
import { getCsrf } from '../session.ts';
import { ErrorBox, Loading, Page, TextField, Time, useLoad, useSubmit } from '../ui.tsx';

type Decision = 'approved' | 'denied';

/** The code the address carries (`#/device?user_code=BCDF-GHJK`), if any. */
function codeInAddress(): string {
  return new URLSearchParams(location.hash.split('?')[1] ?? '').get('user_code') ?? '';
}

/**
 * Where `berth login` sends a person (RFC 8628's verification URI, docs/access.md): the code the terminal
 * shows, the client that asked, and Approve or Deny. Approving gives that client a token of yours.
 */
export function DeviceLogin() {
  const code = codeInAddress();
  return <Page title="Log in a device">{code ? <Decide code={code} /> : <EnterCode />}</Page>;
}

function EnterCode() {
  const [typed, setTyped] = useState('');
  const submit = useSubmit(
    async () => {
      const code = typed.trim();
      if (!code) throw new Error('Enter the code your terminal shows');
      return code;
    },
    (code) => navigate(`/device?user_code=${encodeURIComponent(code)}`),
  );
  return (
    <form class="card" onSubmit={submit.run} noValidate>
      <TextField
        id="user-code"
        label="Code"
        value={typed}
        onInput={setTyped}
        error={submit.error ? messageOf(submit.error) : undefined}
        hint="berth login prints it, like BCDF-GHJK"
        attrs={{ autoComplete: 'off', spellcheck: false }}
      />
      <button type="submit" class="primary">
        Continue
      </button>
    </form>
  );
}

const GONE =
  'No login is waiting with this code: it may have expired (a code works for 10 minutes), been approved or denied already, or been mistyped. Run berth login again for a new one.';

function Decide(props: { code: string }) {
  const [decided, setDecided] = useState<{ decision: Decision; device: string }>();
  const person = getCsrf() !== null;
  const login = useLoad(
    async () =>
      unwrap(await api().GET('/v1/device-logins/{userCode}', { params: { path: { userCode: props.code } } }))
        .device_login,
    [props.code],
  );
  const decide = (decision: Decision) =>
    useSubmit(
      async () => {
        const path =
          decision === 'approved'
            ? '/v1/device-logins/{userCode}/approve'
            : '/v1/device-logins/{userCode}/deny';
        return unwrap(await api().POST(path, { params: { path: { userCode: props.code } } })).device_login;
      },
      (l) => setDecided({ decision, device: l.device_name ?? 'the device' }),
    );
  const approve = decide('approved');
  const deny = decide('denied');
  if (!person) {
    return (
      <p class="error-box" role="alert">
        This tab is signed in with an API token. Approving a login gives the device a token of yours, so it
        needs you signed in as yourself: sign out, then sign in with your email and password.
      </p>
    );
  }
  if (decided) {
    return (
      <p class="notice" role="status">
        {decided.decision === 'approved'
          ? `Approved: berth login on ${decided.device} now has a token of yours. Return to your terminal. berth tokens ls lists it and berth tokens revoke ends it.`
          : `Denied: berth login on ${decided.device} was refused and got no token.`}
      </p>
    );
  }
  if (login.loading && !login.data) return <Loading what="the login request" />;
  if (login.error) {
    return login.error instanceof ApiError && login.error.status === 404 ? (
      <p class="error-box" role="alert">
        {GONE}
      </p>
    ) : (
      <ErrorBox error={login.error} onRetry={login.reload} />
    );
  }
  const l = login.data;
  if (!l) return null;
  const busy = approve.busy || deny.busy;
  const failed = approve.error ?? deny.error;
  return (
    <>
      <p>
        A Berth command line on <strong>{l.device_name ?? 'an unnamed device'}</strong> asks to log in as you.
        Approve only if you ran <code>berth login</code> yourself and your terminal shows this code:
      </p>
      <p class="device-code">{l.user_code}</p>
      <dl class="facts">
        <dt>Client</dt>
        <dd>{l.client_id}</dd>
        <dt>Device</dt>
        <dd>{l.device_name ?? 'not named'}</dd>
        <dt>From address</dt>
        <dd>{l.client_address ?? 'unknown'}</dd>
        <dt>Program</dt>
        <dd>{l.user_agent ?? 'unknown'}</dd>
        <dt>Asked</dt>
        <dd>
          <Time at={l.created_at} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <Time at={l.expires_at} />
        </dd>
      </dl>
      <p class="muted">
        Approving gives it a token with your role, named “berth login on{' '}
        {l.device_name ?? 'an unnamed device'}”, until you revoke it.
      </p>
      {failed !== undefined && (
        <p class="error-box" role="alert">
          {failed instanceof ApiError && failed.status === 404 ? GONE : messageOf(failed)}
        </p>
      )}
      <div class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => void approve.run()}>
          {approve.busy ? 'Approving…' : 'Approve'}
        </button>
        <button type="button" class="danger" disabled={busy} onClick={() => void deny.run()}>
          {deny.busy ? 'Denying…' : 'Deny'}
        </button>
      </div>
    </>
  );
}

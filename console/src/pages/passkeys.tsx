import {
  browserSupportsWebAuthn,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  startAuthentication,
  startRegistration,
  WebAuthnError,
} from '@simplewebauthn/browser';
import { useState } from 'preact/hooks';
import { ApiError, api, auth, messageOf, type SignedIn, unwrap } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import { DataTable } from '../data-table.tsx';
import { Empty, ErrorBox, Loading, TextField, Time, useItemSubmit, useLoad, useSubmit } from '../ui.tsx';

/**
 * Passkeys (docs/access.md): the signed-in person's own, added and removed here; and signing in with
 * one. The browser's WebAuthn prompt goes through @simplewebauthn/browser, which turns Berth's options
 * into the browser's and its answer back into JSON.
 */

/** What to tell the person when the browser's prompt, not Berth, said no. */
export function passkeyMessage(error: unknown): string {
  if (error instanceof WebAuthnError) {
    if (error.code === 'ERROR_AUTHENTICATOR_PREVIOUSLY_REGISTERED')
      return 'This authenticator holds one of your passkeys already.';
    return `The browser did not make the passkey: ${error.message}`;
  }
  if (error instanceof Error && error.name === 'NotAllowedError')
    return 'The passkey prompt was closed or timed out: try again.';
  if (error instanceof ApiError && error.status === 401)
    return 'This passkey was not accepted. Sign in with your password, then add the passkey again.';
  return messageOf(error);
}

/** Signs in with any passkey of this site the browser offers: no email asked (and no extension's output). */
async function signInWithPasskey(): Promise<SignedIn> {
  const { options } = await auth<{ options: PublicKeyCredentialRequestOptionsJSON }>('/passkey-options', {});
  const credential = await startAuthentication({ optionsJSON: options });
  return auth<SignedIn>('/passkey', { credential: { ...credential, clientExtensionResults: {} } });
}

/** The sign-in page's passkey button (none in a browser without WebAuthn). */
export function PasskeySignIn(props: { onSignedIn: (s: SignedIn) => void }) {
  const submit = useSubmit(signInWithPasskey, props.onSignedIn);
  if (!browserSupportsWebAuthn()) return null;
  return (
    <div class="passkey-sign-in">
      <button type="button" onClick={submit.run} disabled={submit.busy}>
        {submit.busy ? 'Waiting for your passkey…' : 'Sign in with a passkey'}
      </button>
      {submit.error !== undefined && (
        <div class="error-box" role="alert">
          <p>{passkeyMessage(submit.error)}</p>
        </div>
      )}
    </div>
  );
}

export function Passkeys() {
  const passkeys = useLoad(async () => unwrap(await api().GET('/v1/passkeys')).passkeys, []);
  const [name, setName] = useState('');
  const [added, setAdded] = useState<string>();
  const add = useSubmit(
    async () => {
      const { options } = unwrap(await api().POST('/v1/passkeys/registration-options', { body: {} }));
      // Berth's schema types the transports as strings; the library names WebAuthn's values.
      const credential = await startRegistration({
        optionsJSON: options as PublicKeyCredentialCreationOptionsJSON,
      });
      // Berth takes the outputs of the one extension it asks for; a password manager may add others.
      const { credProps } = credential.clientExtensionResults;
      const body = {
        credential: { ...credential, clientExtensionResults: credProps ? { credProps } : {} },
        ...(name.trim() && { name: name.trim() }),
      };
      return unwrap(await api().POST('/v1/passkeys', { body })).passkey;
    },
    (passkey) => {
      setAdded(passkey.name);
      setName('');
      passkeys.reload();
    },
  );
  // A removal is asked first, as a member's is: a stray click would take away a way to sign in.
  const [confirming, setConfirming] = useState<{ id: string; name: string } | null>(null);
  const remove = useItemSubmit(
    async (passkeyId) =>
      unwrap(await api().DELETE('/v1/passkeys/{passkeyId}', { params: { path: { passkeyId } } })),
    () => {
      setConfirming(null);
      passkeys.reload();
    },
  );
  const supported = browserSupportsWebAuthn();
  return (
    <>
      <h2>Passkeys</h2>
      <p class="muted">
        A passkey signs you in with this device's screen lock or a security key, instead of your password.
      </p>
      {passkeys.error ? (
        <ErrorBox error={passkeys.error} onRetry={passkeys.reload} />
      ) : passkeys.loading && !passkeys.data ? (
        <Loading what="your passkeys" />
      ) : !passkeys.data?.length ? (
        <Empty>No passkeys yet.</Empty>
      ) : (
        <DataTable
          label="Your passkeys"
          caption="Your passkeys, oldest first"
          rows={passkeys.data}
          keyOf={(p) => p.id}
          columns={[
            { header: 'Name', cell: (p) => p.name },
            { header: 'Added', cell: (p) => <Time at={p.created_at} /> },
            { header: 'Last used', cell: (p) => (p.last_used_at ? <Time at={p.last_used_at} /> : 'never') },
            {
              header: 'Actions',
              actions: true,
              cell: (p) => (
                <button
                  type="button"
                  onClick={() => {
                    remove.reset();
                    setConfirming({ id: p.id, name: p.name });
                  }}
                  disabled={remove.busy}
                  aria-label={`Remove the passkey ${p.name}`}
                >
                  Remove
                </button>
              ),
            },
          ]}
        />
      )}
      {confirming && (
        <Confirm
          id="confirm-remove-passkey-title"
          title={`Remove the passkey ${confirming.name}?`}
          action={`Remove ${confirming.name}`}
          busyAction="Removing…"
          keep="Cancel"
          submit={{ busy: remove.busy, error: remove.error, run: () => remove.pick(confirming.id) }}
          onKeep={() => setConfirming(null)}
        >
          It no longer signs you in. To use that device again, add it as a passkey again.
        </Confirm>
      )}
      {supported ? (
        <form class="card passkey-add" onSubmit={add.run} noValidate>
          <TextField
            id="passkey-name"
            label="Passkey name"
            value={name}
            onInput={setName}
            error={add.errors.name}
            hint="Which device or key it is, to tell it apart in this list (optional)"
          />
          {add.error !== undefined && !add.errors.name && (
            <div class="error-box" role="alert">
              <p>{passkeyMessage(add.error)}</p>
            </div>
          )}
          <button type="submit" class="primary" disabled={add.busy}>
            {add.busy ? 'Waiting for your passkey…' : 'Add a passkey'}
          </button>
          {added && !add.busy && add.error === undefined && (
            <p role="status">Passkey {added} added: sign in with it next time.</p>
          )}
        </form>
      ) : (
        <p class="muted">This browser cannot make passkeys.</p>
      )}
    </>
  );
}

import { useState } from 'preact/hooks';
import { ROLES } from '../../../src/domain/roles.ts';
import { api, unwrap } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import { DataTable } from '../data-table.tsx';
import { FormErrors } from '../form-errors.tsx';
import { signOut } from '../layout.tsx';
import {
  CheckboxField,
  Empty,
  ErrorBox,
  Loading,
  Page,
  SelectField,
  ShownOnce,
  TextField,
  Time,
  useItemSubmit,
  useLoad,
  useSubmit,
} from '../ui.tsx';

type Role = (typeof ROLES)[number];

/** A token's name as the list and the revoke button say it. */
const labelOf = (t: { name: string | null }) => t.name ?? 'issued by the operator';

/** The account's API tokens (admins): make one (shown once), revoke one (asked first). docs/access.md. */
export function Tokens() {
  const list = useLoad(async () => unwrap(await api().GET('/v1/tokens')).tokens, []);
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('developer');
  const [readOnly, setReadOnly] = useState(false);
  const [made, setMade] = useState<{ name: string; token: string }>();
  const [revoking, setRevoking] = useState<{ id: string; name: string; current: boolean } | null>(null);
  const make = useSubmit(
    async () =>
      unwrap(await api().POST('/v1/tokens', { body: { name: name.trim(), role, read_only: readOnly } }))
        .token,
    (token) => {
      setMade({ name: token.name ?? '', token: token.token });
      setName('');
      setReadOnly(false);
      list.reload();
    },
  );
  const revoke = useItemSubmit(
    async (tokenId) => unwrap(await api().DELETE('/v1/tokens/{tokenId}', { params: { path: { tokenId } } })),
    () => {
      // This tab's own token: every later call would be refused, so sign out now rather than fail.
      if (revoking?.current) void signOut();
      else {
        setRevoking(null);
        list.reload();
      }
    },
  );
  return (
    <Page title="API tokens">
      <p class="muted">
        A token lets a script or the berth CLI act for the account, with a role no higher than yours.
      </p>
      {list.error ? (
        <ErrorBox error={list.error} onRetry={list.reload} />
      ) : list.loading && !list.data ? (
        <Loading what="the tokens" />
      ) : !list.data?.length ? (
        <Empty>No API tokens yet: make one below.</Empty>
      ) : (
        <DataTable
          label="API tokens"
          caption="API tokens, newest first"
          rows={list.data}
          keyOf={(t) => t.id}
          columns={[
            {
              header: 'Name',
              cell: (t) => (
                <>
                  {labelOf(t)}
                  {t.current && ' (this tab)'}
                </>
              ),
            },
            {
              header: 'Role',
              cell: (t) => (
                <>
                  {t.role}
                  {t.read_only && ', reads only'}
                </>
              ),
            },
            { header: 'Made by', cell: (t) => t.owner?.email ?? <span class="muted">the operator</span> },
            {
              header: 'Reaches',
              cell: (t) =>
                t.environment_ids === null
                  ? 'every environment'
                  : t.environment_ids.length === 1
                    ? '1 environment'
                    : `${t.environment_ids.length} environments`,
            },
            { header: 'Last used', cell: (t) => (t.last_used_at ? <Time at={t.last_used_at} /> : 'never') },
            { header: 'Expires', cell: (t) => (t.expires_at ? <Time at={t.expires_at} /> : 'never') },
            {
              header: 'Actions',
              actions: true,
              cell: (t) =>
                t.revoked_at ? (
                  <span class="muted">
                    revoked <Time at={t.revoked_at} />
                  </span>
                ) : (
                  <button
                    type="button"
                    onClick={() => {
                      revoke.reset();
                      setRevoking({ id: t.id, name: labelOf(t), current: t.current });
                    }}
                    aria-label={`Revoke the token ${labelOf(t)}`}
                  >
                    Revoke
                  </button>
                ),
            },
          ]}
        />
      )}
      {revoking && (
        <Confirm
          id="confirm-revoke-token-title"
          title={
            revoking.current
              ? `Revoke the token ${revoking.name} and sign this tab out?`
              : `Revoke the token ${revoking.name}?`
          }
          action={revoking.current ? `Revoke ${revoking.name} and sign out` : `Revoke ${revoking.name}`}
          busyAction="Revoking…"
          keep="Cancel"
          submit={{ busy: revoke.busy, error: revoke.error, run: () => revoke.pick(revoking.id) }}
          onKeep={() => setRevoking(null)}
        >
          {revoking.current &&
            'This tab is signed in with this token: revoking it signs this tab out, and you sign in again with another token or your password. '}
          Whatever uses it is refused within a second. A revoked token cannot be brought back: make a new one.
        </Confirm>
      )}
      {made && (
        <ShownOnce id="made-token" value={made.token} what="the token">
          Token {made.name} made. It is shown only now: keep it where its script or CLI reads it.
        </ShownOnce>
      )}
      <h2>Make a token</h2>
      <form class="card" onSubmit={make.run} noValidate>
        <FormErrors
          error={make.error}
          unplaced={Object.entries(make.errors).filter(([f]) => f !== 'name' && f !== 'role')}
        />
        <div class="grid-2">
          <TextField
            id="token-name"
            label="Name"
            required
            value={name}
            onInput={setName}
            error={make.errors.name}
            hint="What uses it, to tell it apart in this list"
          />
          <SelectField
            id="token-role"
            label="Role"
            value={role}
            options={ROLES}
            onChange={(r) => setRole(r as Role)}
            error={make.errors.role}
            hint="At most your own; docs/access.md says what each role may do"
          />
        </div>
        <CheckboxField id="token-read-only" label="Reads only" checked={readOnly} onChange={setReadOnly} />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={make.busy}>
            {make.busy ? 'Making…' : 'Make the token'}
          </button>
        </div>
      </form>
    </Page>
  );
}

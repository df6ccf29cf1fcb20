import { useState } from 'preact/hooks';
import { api, unwrap } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import { DataTable } from '../data-table.tsx';
import { signOut } from '../layout.tsx';
import { getCsrf } from '../session.ts';
import {
  Empty,
  ErrorBox,
  Loading,
  Page,
  refusalOf,
  SelectField,
  ShownOnce,
  TextField,
  Time,
  useItemSubmit,
  useLoad,
  useSubmit,
} from '../ui.tsx';
import { Passkeys } from './passkeys.tsx';

const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const;
type Role = (typeof ROLES)[number];
type Invited = { email: string; role: string; path: string; mailed: boolean };

/** The signed-in person's sessions, each one ended here; and the account's members and invitations. */
export function People() {
  const sessions = useLoad(async () => unwrap(await api().GET('/v1/sessions')).sessions, []);
  const end = useItemSubmit(
    async (sessionId) =>
      unwrap(await api().DELETE('/v1/sessions/{sessionId}', { params: { path: { sessionId } } })),
    sessions.reload,
  );
  return (
    <Page title="Sessions and people">
      <h2>Your sessions</h2>
      {getCsrf() === null && <p class="muted">This tab is signed in with an API token: it has no session.</p>}
      {sessions.error ? (
        <ErrorBox error={sessions.error} onRetry={sessions.reload} />
      ) : sessions.loading && !sessions.data ? (
        <Loading what="your sessions" />
      ) : !sessions.data?.length ? (
        <Empty>No sessions.</Empty>
      ) : (
        <DataTable
          label="Your sessions, newest first"
          rows={sessions.data}
          keyOf={(s) => s.id}
          columns={[
            {
              header: 'Signed in',
              cell: (s) => (
                <>
                  <Time at={s.created_at} />
                  {s.current && ' (this one)'}
                </>
              ),
            },
            { header: 'Last seen', cell: (s) => <Time at={s.last_seen_at} /> },
            { header: 'Browser', cell: (s) => s.user_agent ?? 'unknown' },
            { header: 'Address', cell: (s) => s.client_address ?? 'unknown' },
            {
              header: 'Actions',
              actions: true,
              cell: (s) =>
                s.current ? (
                  <button type="button" onClick={() => signOut()}>
                    Sign out
                  </button>
                ) : (
                  <button
                    type="button"
                    onClick={() => end.pick(s.id)}
                    disabled={end.busy}
                    aria-label={`End the session signed in ${new Date(s.created_at).toLocaleString()}`}
                  >
                    End session
                  </button>
                ),
            },
          ]}
        />
      )}
      {end.error !== undefined && <ErrorBox error={end.error} />}
      {getCsrf() !== null && <Passkeys />}
      <Members />
    </Page>
  );
}

/**
 * The account's members, each removed here, and the form inviting more (admins). A role that may not
 * (the members' list refused) is told which role may, in place of both.
 */
function Members() {
  const members = useLoad(async () => unwrap(await api().GET('/v1/members')).members, []);
  const refused = refusalOf(members.error) !== null;
  // A removal is asked first: one stray click would lock a colleague out.
  const [confirming, setConfirming] = useState<{ userId: string; email: string } | null>(null);
  const remove = useItemSubmit(
    async (userId) => unwrap(await api().DELETE('/v1/members/{userId}', { params: { path: { userId } } })),
    () => {
      setConfirming(null);
      members.reload();
    },
  );
  if (refused)
    return (
      <>
        <h2>Members</h2>
        <ErrorBox
          error={members.error}
          onRetry={members.reload}
          refusedTo="see the members or invite anyone"
        />
      </>
    );
  return (
    <>
      <h2>Members</h2>
      {members.error ? (
        <ErrorBox error={members.error} onRetry={members.reload} />
      ) : members.loading && !members.data ? (
        <Loading what="the members" />
      ) : !members.data?.length ? (
        <Empty>No members yet: invite someone below.</Empty>
      ) : (
        <DataTable
          label="Members"
          rows={members.data}
          keyOf={(m) => m.user_id}
          columns={[
            { header: 'Name', cell: (m) => m.display_name },
            { header: 'Email', cell: (m) => m.email },
            { header: 'Role', cell: (m) => m.role },
            {
              header: 'Actions',
              actions: true,
              cell: (m) => (
                <button
                  type="button"
                  onClick={() => {
                    remove.reset();
                    setConfirming({ userId: m.user_id, email: m.email });
                  }}
                  disabled={remove.busy}
                  aria-label={`Remove ${m.email}`}
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
          id="confirm-remove-title"
          title={`Remove ${confirming.email} from the account?`}
          action={`Remove ${confirming.email}`}
          busyAction="Removing…"
          keep="Cancel"
          submit={{ busy: remove.busy, error: remove.error, run: () => remove.pick(confirming.userId) }}
          onKeep={() => setConfirming(null)}
        >
          They lose access at once, and so do the tokens they made. Inviting them again brings them back.
        </Confirm>
      )}
      <Invitations />
    </>
  );
}

/** The invitations waiting to be accepted, each revoked here (asked first), and the form making more. */
function Invitations() {
  const pending = useLoad(async () => unwrap(await api().GET('/v1/invitations')).invitations, []);
  const [confirming, setConfirming] = useState<{ id: string; email: string } | null>(null);
  const revoke = useItemSubmit(
    async (invitationId) =>
      unwrap(await api().DELETE('/v1/invitations/{invitationId}', { params: { path: { invitationId } } })),
    () => {
      setConfirming(null);
      pending.reload();
    },
  );
  return (
    <>
      <h2>Pending invitations</h2>
      {pending.error ? (
        <ErrorBox error={pending.error} onRetry={pending.reload} refusedTo="see the invitations" />
      ) : pending.loading && !pending.data ? (
        <Loading what="the invitations" />
      ) : !pending.data?.length ? (
        <Empty>No invitations waiting to be accepted.</Empty>
      ) : (
        <DataTable
          label="Pending invitations"
          caption="Pending invitations, newest first"
          rows={pending.data}
          keyOf={(i) => i.id}
          columns={[
            { header: 'Email', cell: (i) => i.email },
            { header: 'Role', cell: (i) => i.role },
            {
              header: 'Invited by',
              cell: (i) => i.invited_by?.email ?? <span class="muted">an operator's token</span>,
            },
            { header: 'Invited', cell: (i) => <Time at={i.created_at} /> },
            { header: 'Expires', cell: (i) => <Time at={i.expires_at} /> },
            {
              header: 'Actions',
              actions: true,
              cell: (i) => (
                <button
                  type="button"
                  onClick={() => {
                    revoke.reset();
                    setConfirming({ id: i.id, email: i.email });
                  }}
                  disabled={revoke.busy}
                  aria-label={`Revoke the invitation of ${i.email}`}
                >
                  Revoke
                </button>
              ),
            },
          ]}
        />
      )}
      {confirming && (
        <Confirm
          id="confirm-revoke-invitation-title"
          title={`Revoke the invitation of ${confirming.email}?`}
          action={`Revoke the invitation of ${confirming.email}`}
          busyAction="Revoking…"
          keep="Cancel"
          submit={{ busy: revoke.busy, error: revoke.error, run: () => revoke.pick(confirming.id) }}
          onKeep={() => setConfirming(null)}
        >
          Its link stops working at once. Inviting them again makes a new link.
        </Confirm>
      )}
      <Invite onInvited={pending.reload} />
    </>
  );
}

/** Invites someone by email with a role; the link is shown once (and mailed when Berth can). */
function Invite(props: { onInvited: () => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('developer');
  const [invited, setInvited] = useState<Invited>();
  const invite = useSubmit(
    async () =>
      unwrap(await api().POST('/v1/invitations', { body: { email: email.trim(), role: role as Role } }))
        .invitation,
    (invitation) => {
      setInvited(invitation);
      setEmail('');
      props.onInvited();
    },
  );
  const link = invited ? `${location.origin}${invited.path}` : undefined;
  return (
    <>
      <h2>Invite someone</h2>
      <form class="card" onSubmit={invite.run} noValidate>
        <TextField
          id="invite-email"
          label="Email"
          value={email}
          onInput={setEmail}
          error={invite.errors.email}
          attrs={{ spellcheck: false }}
        />
        <SelectField
          id="invite-role"
          label="Role"
          value={role}
          options={ROLES}
          onChange={setRole}
          error={invite.errors.role}
          hint="docs/access.md says what each role may do"
        />
        {invite.error !== undefined && !Object.keys(invite.errors).length && (
          <ErrorBox error={invite.error} />
        )}
        <button type="submit" class="primary" disabled={invite.busy}>
          {invite.busy ? 'Inviting…' : 'Invite'}
        </button>
      </form>
      {link && invited && (
        <ShownOnce id="invitation-link" value={link} what="the invitation link">
          Invited {invited.email} as {invited.role}
          {invited.mailed ? ' (mailed)' : ''}. The link works once, for a week; it is shown only now:
        </ShownOnce>
      )}
    </>
  );
}

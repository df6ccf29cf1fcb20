import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, isSignedOut, messageOf, unwrap } from '../api.ts';
import { inLabel } from '../form-errors.tsx';
import { navigate } from '../router.ts';
import { useServiceName } from '../service-name.ts';
import type { Secret, SecretInput } from '../types.ts';
import { CheckboxField, ErrorBox, Loading, Page, TextField, useSubmit } from '../ui.tsx';

/** One row of the editor. `value` is what was typed: for a stored sensitive key, empty keeps it. */
interface Row {
  uid: number;
  key: string;
  value: string;
  sensitive: boolean;
  /** The stored entry this row started from (none for a new row). */
  stored?: Secret;
}

let uids = 0;
const rowOf = (s: Secret): Row => ({
  uid: ++uids,
  key: s.key,
  value: s.value ?? '',
  sensitive: s.is_sensitive,
  stored: s,
});

interface Diff {
  added: string[];
  changed: string[];
  removed: string[];
}

/** What a save would do, key by key. A sensitive value left empty is kept, so it is no change. */
export function diffOf(stored: Secret[], rows: Row[]): Diff {
  const before = new Map(stored.map((s) => [s.key, s]));
  const after = new Set(rows.map((r) => r.key.trim()).filter(Boolean));
  const added: string[] = [];
  const changed: string[] = [];
  for (const row of rows) {
    const key = row.key.trim();
    if (!key) continue;
    const old = before.get(key);
    if (!old) added.push(key);
    else if (
      old.is_sensitive !== row.sensitive ||
      (old.is_sensitive ? row.value !== '' : (old.value ?? '') !== row.value)
    )
      changed.push(key);
  }
  const removed = stored.map((s) => s.key).filter((k) => !after.has(k));
  return { added, changed, removed };
}

/** A row left wholly empty is not sent. */
const isSent = (r: Row) => Boolean(r.key.trim() || r.value);

/** The full replace: every row, a stored sensitive key without a value keeps what is stored. */
function bodyOf(rows: Row[]): SecretInput[] {
  return rows.filter(isSent).map((r) => {
    const keep = r.stored?.is_sensitive && r.sensitive && r.value === '' && r.stored.key === r.key.trim();
    return {
      key: r.key.trim(),
      ...(!keep && { value: r.value }),
      is_sensitive: r.sensitive,
      ...(r.stored && { description: r.stored.description, use_preview: r.stored.use_preview }),
    };
  });
}

/**
 * Row errors by row (`uid.key`): the API's `secrets[2].key` counts the rows sent, which skip empty ones.
 * Each keeps the API's field, so the row can word it with its own label.
 */
function rowErrors(error: unknown, sent: Row[]): Map<string, { field: string; error: string }> {
  const out = new Map<string, { field: string; error: string }>();
  if (error instanceof ApiError) {
    for (const e of error.body.errors ?? []) {
      const m = /^secrets\[(\d+)\]\.(\w+)/.exec(e.field);
      const row = m && sent[Number(m[1])];
      out.set(row ? `${row.uid}.${m[2]}` : e.field, e);
    }
  }
  return out;
}

export function Secrets(props: { envId: string; serviceId?: string }) {
  const { envId, serviceId } = props;
  const [stored, setStored] = useState<Secret[]>();
  const [etag, setEtag] = useState<string | null>(null);
  const [rows, setRows] = useState<Row[]>([]);
  const [loadError, setLoadError] = useState<unknown>();
  const [reviewing, setReviewing] = useState(false);
  const [saved, setSaved] = useState(false);
  const [round, setRound] = useState(0);
  /** The rows the last save sent: its errors name them by position. */
  const sent = useRef<Row[]>([]);

  const read = () =>
    serviceId
      ? api().GET('/v1/environments/{envId}/services/{serviceId}/secrets', {
          params: { path: { envId, serviceId } },
        })
      : api().GET('/v1/environments/{envId}/secrets', { params: { path: { envId } } });

  useEffect(() => {
    read().then(
      (result) => {
        const { secrets } = unwrap(result);
        setStored(secrets);
        setEtag(result.response.headers.get('etag'));
        setRows(secrets.map(rowOf));
        setLoadError(undefined);
      },
      (e) => {
        if (isSignedOut(e)) navigate('/sign-in');
        else setLoadError(e);
      },
    );
  }, [envId, serviceId, round]);

  const update = (uid: number, patch: Partial<Row>) => {
    setSaved(false);
    setReviewing(false);
    setRows((all) => all.map((r) => (r.uid === uid ? { ...r, ...patch } : r)));
  };
  const add = () => {
    setSaved(false);
    setReviewing(false);
    setRows((all) => [...all, { uid: ++uids, key: '', value: '', sensitive: false }]);
  };
  const remove = (uid: number) => {
    setSaved(false);
    setReviewing(false);
    setRows((all) => all.filter((r) => r.uid !== uid));
  };

  const save = useSubmit(
    async () => {
      sent.current = rows.filter(isSent);
      const body = { secrets: bodyOf(rows) };
      // If-Match: the replace happens only if nobody changed the secrets since they were read.
      const headers = etag ? { 'if-match': etag } : {};
      unwrap(
        serviceId
          ? await api().PUT('/v1/environments/{envId}/services/{serviceId}/secrets', {
              params: { path: { envId, serviceId }, header: headers },
              body,
            })
          : await api().PUT('/v1/environments/{envId}/secrets', {
              params: { path: { envId }, header: headers },
              body,
            }),
      );
    },
    () => {
      setReviewing(false);
      setSaved(true);
      setRound((r) => r + 1);
    },
  );
  const saveError = save.error;
  const conflict = saveError instanceof ApiError && saveError.status === 412;
  /** What is stored now, in place of the edits (after a conflict). */
  const reload = () => {
    save.reset();
    setSaved(false);
    setReviewing(false);
    setRound((r) => r + 1);
  };

  const serviceName = useServiceName(envId, serviceId);
  const title = !serviceId
    ? 'Environment secrets'
    : serviceName
      ? `Secrets of ${serviceName}`
      : 'Service secrets';
  const back = serviceId ? `#/envs/${envId}/services/${serviceId}` : `#/envs/${envId}`;
  const errors = rowErrors(saveError, sent.current);
  const rowError = (uid: number, field: string, label: string) => {
    const e = errors.get(`${uid}.${field}`);
    return inLabel(e?.error, e?.field ?? '', label);
  };
  const diff = stored ? diffOf(stored, rows) : { added: [], changed: [], removed: [] };
  const changes = diff.added.length + diff.changed.length + diff.removed.length;

  return (
    <Page title={title}>
      <p class="crumbs">
        <a href={back}>← {serviceId ? (serviceName ?? 'Service') : 'Environment'}</a>
      </p>
      <p class="muted">
        {serviceId
          ? 'Variables of this service. They reach it with its next deployment.'
          : 'Variables every service of this environment gets; a service secret of the same key wins.'}{' '}
        Sensitive values are never shown again once saved: leave one empty to keep it, type to replace it.
      </p>
      {loadError ? (
        <ErrorBox error={loadError} onRetry={() => setRound((r) => r + 1)} />
      ) : !stored ? (
        <Loading what="secrets" />
      ) : (
        <form
          class="card"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            setReviewing(true);
          }}
        >
          {saveError !== undefined && (
            <div class="error-box" role="alert">
              <p>
                {conflict
                  ? 'Someone changed these secrets since this page read them. Reload them (your edits here are dropped), then make your change again.'
                  : saveError instanceof ApiError && saveError.status === 422
                    ? `${messageOf(saveError)}: fix the rows marked below.`
                    : messageOf(saveError)}
              </p>
              {conflict && (
                <button type="button" onClick={reload}>
                  Reload the secrets
                </button>
              )}
            </div>
          )}
          {saved && (
            <p class="notice" role="status">
              Secrets saved.
            </p>
          )}
          {rows.length === 0 && <p class="muted">No secrets yet: add one.</p>}
          {rows.map((r, i) => {
            const hidden = r.stored?.is_sensitive === true;
            // A viewer reads keys, never values: the API leaves `value` out, which is not an empty value.
            const unread = !hidden && r.stored !== undefined && r.stored.value === undefined;
            return (
              <div class="secret-row" key={r.uid}>
                <TextField
                  id={`secret-${r.uid}-key`}
                  label={`Key ${i + 1}`}
                  value={r.key}
                  onInput={(key) => update(r.uid, { key })}
                  error={rowError(r.uid, 'key', `Key ${i + 1}`)}
                  attrs={{ spellcheck: false, autoComplete: 'off' }}
                />
                <TextField
                  id={`secret-${r.uid}-value`}
                  label={r.key.trim() ? `Value of ${r.key.trim()}` : `Value ${i + 1}`}
                  type={r.sensitive ? 'password' : 'text'}
                  value={r.value}
                  onInput={(value) => update(r.uid, { value })}
                  error={rowError(
                    r.uid,
                    'value',
                    r.key.trim() ? `Value of ${r.key.trim()}` : `Value ${i + 1}`,
                  )}
                  hint={
                    hidden
                      ? 'set (hidden); type to replace'
                      : unread
                        ? 'not shown: your role reads keys, not values'
                        : undefined
                  }
                  attrs={{
                    spellcheck: false,
                    autoComplete: 'off',
                    ...((hidden || unread) && { placeholder: '•••••• set' }),
                  }}
                />
                <CheckboxField
                  id={`secret-${r.uid}-sensitive`}
                  label="Sensitive"
                  checked={r.sensitive}
                  onChange={(sensitive) => update(r.uid, { sensitive })}
                  error={rowError(r.uid, 'is_sensitive', 'Sensitive')}
                />
                <button
                  type="button"
                  class="danger"
                  onClick={() => remove(r.uid)}
                  aria-label={`Remove ${r.key || `row ${i + 1}`}`}
                >
                  Remove
                </button>
              </div>
            );
          })}
          <div class="form-actions">
            <button type="button" onClick={add}>
              Add a secret
            </button>
            <button type="submit" class="primary" disabled={changes === 0}>
              Review changes
            </button>
          </div>
          {reviewing && (
            <section class="card" aria-labelledby="review-title">
              <h2 id="review-title">Saving replaces all the secrets: this changes</h2>
              <ul class="diff">
                {diff.added.map((k) => (
                  <li class="added" key={`a${k}`}>
                    + added <code>{k}</code>
                  </li>
                ))}
                {diff.changed.map((k) => (
                  <li class="changed" key={`c${k}`}>
                    ~ changed <code>{k}</code>
                  </li>
                ))}
                {diff.removed.map((k) => (
                  <li class="removed" key={`r${k}`}>
                    − removed <code>{k}</code>
                  </li>
                ))}
              </ul>
              <div class="form-actions">
                <button type="button" class="primary" onClick={() => save.run()} disabled={save.busy}>
                  {save.busy ? 'Saving…' : `Save ${changes} change${changes === 1 ? '' : 's'}`}
                </button>
                <button type="button" onClick={() => setReviewing(false)}>
                  Keep editing
                </button>
              </div>
            </section>
          )}
        </form>
      )}
    </Page>
  );
}

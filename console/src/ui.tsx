import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, type FieldErrors, fieldErrorsOf, isSignedOut, messageOf } from './api.ts';
import { navigate } from './router.ts';

/**
 * Loads data for a page; a 401 on the way signs out. `refreshMs`: loads again that often while the tab
 * is visible, for what changes by itself (states, run status, ready replicas).
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], options: { refreshMs?: number } = {}) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => {
        if (isSignedOut(error)) navigate('/sign-in');
        else if (live) setState({ error, loading: false });
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  useEffect(() => {
    if (!options.refreshMs) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') reload();
    }, options.refreshMs);
    return () => clearInterval(timer);
  }, [options.refreshMs, reload]);
  return { ...state, reload };
}

/**
 * A form's call: busy while it runs, then its error (with the API's field errors by field) or `onDone`.
 * A 401 signs out. `run` takes the submit event, so it can be a form's onSubmit as it is.
 */
export function useSubmit<T>(action: () => Promise<T>, onDone?: (result: T) => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = async (event?: Event) => {
    event?.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const result = await action();
      onDone?.(result);
    } catch (e) {
      // Shown on the sign-in page itself; any other page is left for it.
      if (isSignedOut(e)) navigate('/sign-in');
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const errors: FieldErrors = fieldErrorsOf(error);
  return { busy, error, errors, run, reset: () => setError(undefined) };
}

/** A submit acting on one item of a list: `pick(id)` runs `action` for the item whose button was pressed. */
export function useItemSubmit(action: (id: string) => Promise<unknown>, onDone?: () => void) {
  const picked = useRef('');
  const submit = useSubmit(() => action(picked.current), onDone);
  const pick = (id: string) => {
    picked.current = id;
    void submit.run();
  };
  return { ...submit, pick };
}

export function Page(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Berth`;
  }, [props.title]);
  return (
    <section aria-labelledby="page-title">
      <div class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {props.title}
        </h1>
        {props.actions && <div class="actions">{props.actions}</div>}
      </div>
      {props.children}
    </section>
  );
}

/**
 * What to say when a read was refused (403): the role cannot see it, and which role can when the API
 * names it ("This call needs the admin role; this token acts as viewer"). Null for any other error.
 */
export function refusalOf(error: unknown, what = 'see this'): string | null {
  if (!(error instanceof ApiError) || error.status !== 403) return null;
  const roles = /needs the (\w+) role; this token acts as (\w+)/.exec(error.message);
  if (!roles) return `You cannot ${what}: ${error.message}`;
  return `Your role (${roles[2]}) cannot ${what}: it needs the ${roles[1]} role. An admin of the account can give it to you.`;
}

/**
 * A failed call; a load's error offers to try again. A read the role may not make is no failure but a
 * lasting fact of the page: said calmly, with no retry.
 */
export function ErrorBox(props: { error: unknown; onRetry?: () => void; refusedTo?: string }) {
  const refusal = props.onRetry ? refusalOf(props.error, props.refusedTo) : null;
  if (refusal)
    return (
      <p class="refusal" role="status">
        {refusal}
      </p>
    );
  return (
    <div class="error-box" role="alert">
      <p>{messageOf(props.error)}</p>
      {props.onRetry && (
        <button type="button" onClick={props.onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Loading(props: { what?: string }) {
  return (
    <p class="muted" role="status">
      Loading {props.what ?? ''}…
    </p>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <div class="empty">{props.children}</div>;
}

export function StateBadge(props: { state: string | null | undefined }) {
  const state = props.state ?? 'unknown';
  const tone = /fail|delet/.test(state)
    ? 'bad'
    : /^(success|succeeded|running|available|deployed|verified|issued)$/.test(state)
      ? 'good'
      : 'busy';
  return <span class={`badge ${tone}`}>{state.replaceAll('_', ' ')}</span>;
}

export function Time(props: { at: string | null | undefined }) {
  if (!props.at) return <span class="muted">—</span>;
  const date = new Date(props.at);
  return (
    <time dateTime={props.at} title={props.at}>
      {date.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' })}
    </time>
  );
}

interface FieldProps {
  id: string;
  label: string;
  hint?: string | undefined;
  error?: string | undefined;
  required?: boolean | undefined;
}

function describedBy(p: FieldProps): string | undefined {
  const ids = [p.hint && `${p.id}-hint`, p.error && `${p.id}-error`].filter(Boolean);
  return ids.length ? ids.join(' ') : undefined;
}

function FieldShell(props: FieldProps & { children: ComponentChildren; inline?: boolean }) {
  return (
    <div class={`field${props.error ? ' invalid' : ''}${props.inline ? ' inline' : ''}`}>
      {props.inline ? (
        props.children
      ) : (
        <>
          <label for={props.id}>
            {props.label}
            {props.required && <span class="required"> (required)</span>}
          </label>
          {props.children}
        </>
      )}
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      )}
    </div>
  );
}

/** The few input attributes the console sets besides value and type. */
interface InputAttrs {
  autoComplete?: string;
  spellcheck?: boolean;
  step?: string;
  inputMode?: 'numeric' | 'decimal' | 'text';
  placeholder?: string;
}

export function TextField(
  props: FieldProps & {
    value: string;
    onInput: (value: string) => void;
    type?: 'text' | 'password' | 'number';
    attrs?: InputAttrs;
  },
) {
  return (
    <FieldShell {...props}>
      <input
        id={props.id}
        name={props.id}
        // Preact types an input's attributes by its type; all three take the same ones here.
        type={(props.type ?? 'text') as 'text'}
        value={props.value}
        required={props.required}
        aria-invalid={props.error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
        onInput={(e) => props.onInput(e.currentTarget.value)}
        {...props.attrs}
      />
    </FieldShell>
  );
}

export function TextAreaField(
  props: FieldProps & { value: string; onInput: (value: string) => void; rows?: number },
) {
  return (
    <FieldShell {...props}>
      <textarea
        id={props.id}
        name={props.id}
        rows={props.rows ?? 4}
        value={props.value}
        aria-invalid={props.error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
    </FieldShell>
  );
}

export function SelectField(
  props: FieldProps & {
    value: string;
    options: readonly (string | { value: string; label: string })[];
    onChange: (value: string) => void;
  },
) {
  return (
    <FieldShell {...props}>
      <select
        id={props.id}
        name={props.id}
        value={props.value}
        required={props.required}
        aria-invalid={props.error ? 'true' : undefined}
        aria-describedby={describedBy(props)}
        onChange={(e) => props.onChange(e.currentTarget.value)}
      >
        {props.options.map((o) =>
          typeof o === 'string' ? (
            <option key={o} value={o}>
              {o}
            </option>
          ) : (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ),
        )}
      </select>
    </FieldShell>
  );
}

export function CheckboxField(
  props: FieldProps & { checked: boolean; onChange: (checked: boolean) => void },
) {
  return (
    <FieldShell {...props} inline>
      <label class="check" for={props.id}>
        <input
          id={props.id}
          name={props.id}
          type="checkbox"
          checked={props.checked}
          aria-invalid={props.error ? 'true' : undefined}
          aria-describedby={describedBy(props)}
          onChange={(e) => props.onChange(e.currentTarget.checked)}
        />
        {props.label}
      </label>
    </FieldShell>
  );
}

/**
 * Cursor pages: the API gives the next page's cursor only, so the way back is the cursors seen so far.
 */
export function usePages() {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors.at(-1);
  return {
    cursor,
    page: cursors.length,
    next: (nextCursor: string) => setCursors((c) => [...c, nextCursor]),
    previous: () => setCursors((c) => (c.length > 1 ? c.slice(0, -1) : c)),
    first: () => setCursors([undefined]),
  };
}

export function Pager(props: {
  page: number;
  nextCursor: string | null | undefined;
  pages: ReturnType<typeof usePages>;
  label: string;
}) {
  if (props.page === 1 && !props.nextCursor) return null;
  return (
    <nav class="pager" aria-label={`${props.label} pages`}>
      <button type="button" disabled={props.page === 1} onClick={props.pages.previous}>
        ← Newer
      </button>
      <span>Page {props.page}</span>
      <button
        type="button"
        disabled={!props.nextCursor}
        onClick={() => props.nextCursor && props.pages.next(props.nextCursor)}
      >
        Older →
      </button>
    </nav>
  );
}

/** Copies to the clipboard; on plain http (no Clipboard API) through a selected textarea. */
async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'offscreen';
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

export function CopyButton(props: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      class="small"
      aria-label={`Copy ${props.label}`}
      onClick={() =>
        copyText(props.text).then(
          () => {
            setCopied(true);
            setTimeout(() => setCopied(false), 1500);
          },
          () => setCopied(false),
        )
      }
    >
      {copied ? 'Copied' : 'Copy'}
    </button>
  );
}

/**
 * A table that scrolls sideways on a narrow screen: focusable, so a keyboard can scroll it too, and named
 * for the screen reader that lands on it.
 */
/**
 * A value the API gives only once (a token, a signing secret, an invitation link): what it is and where
 * to keep it, the value, and a button that copies it.
 */
export function ShownOnce(props: { id: string; value: string; what: string; children: ComponentChildren }) {
  return (
    <div class="card" role="status">
      <p>{props.children}</p>
      <p>
        <code id={props.id}>{props.value}</code> <CopyButton text={props.value} label={props.what} />
      </p>
    </div>
  );
}

export function TableWrap(props: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard to be scrolled
    <section class="table-wrap" aria-label={props.label} tabIndex={0}>
      {props.children}
    </section>
  );
}

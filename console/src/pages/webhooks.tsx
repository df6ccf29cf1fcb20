import { useState } from 'preact/hooks';
import { EVENT_TYPES } from '../../../src/domain/events.ts';
import { api, unwrap } from '../api.ts';
import { Confirm } from '../confirm.tsx';
import { DataTable } from '../data-table.tsx';
import { FormErrors } from '../form-errors.tsx';
import {
  Empty,
  ErrorBox,
  Loading,
  Page,
  Pager,
  ShownOnce,
  StateBadge,
  TextField,
  Time,
  useItemSubmit,
  useLoad,
  usePages,
  useSubmit,
} from '../ui.tsx';

const DELIVERIES_PAGE = 25;
/** Deliveries change by themselves (attempts, retries): read again this often. */
const REFRESH_MS = 5000;

type Created = { url: string; secret: string };

/** The account's webhook subscriptions: subscribe a URL (its signing secret shown once), remove one. */
export function Webhooks() {
  const list = useLoad(async () => unwrap(await api().GET('/v1/webhooks')).webhooks, []);
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<string[]>([]);
  const [created, setCreated] = useState<Created>();
  const [removing, setRemoving] = useState<{ id: string; url: string } | null>(null);
  const subscribe = useSubmit(
    async () =>
      unwrap(
        await api().POST('/v1/webhooks', {
          body: {
            url: url.trim(),
            ...(description.trim() && { description: description.trim() }),
            ...(types.length > 0 && { event_types: types as (typeof EVENT_TYPES)[number][] }),
          },
        }),
      ).webhook,
    (webhook) => {
      setCreated({ url: webhook.url, secret: webhook.secret });
      setUrl('');
      setDescription('');
      setTypes([]);
      list.reload();
    },
  );
  const remove = useItemSubmit(
    async (webhookId) =>
      unwrap(await api().DELETE('/v1/webhooks/{webhookId}', { params: { path: { webhookId } } })),
    () => {
      setRemoving(null);
      list.reload();
    },
  );
  const toggle = (type: string, on: boolean) =>
    setTypes((all) => (on ? [...all, type] : all.filter((t) => t !== type)));
  return (
    <Page title="Webhooks">
      <p class="muted">
        Each event of the account the subscription wants is POSTed to its URL, signed the Standard Webhooks
        way (docs/events.md), and retried for about two and a half hours.
      </p>
      {list.error ? (
        <ErrorBox error={list.error} onRetry={list.reload} />
      ) : list.loading && !list.data ? (
        <Loading what="the webhooks" />
      ) : !list.data?.length ? (
        <Empty>No webhooks yet: subscribe a URL below.</Empty>
      ) : (
        <DataTable
          label="Webhooks"
          rows={list.data}
          keyOf={(w) => w.id}
          columns={[
            {
              header: 'URL',
              cell: (w) => (
                <a href={`#/webhooks/${w.id}`} aria-label={`Deliveries to ${w.url}`}>
                  <code>{w.url}</code>
                </a>
              ),
            },
            { header: 'Events', cell: (w) => (w.event_types.length ? w.event_types.join(', ') : 'all') },
            { header: 'Description', cell: (w) => w.description || <span class="muted">—</span> },
            { header: 'Created', cell: (w) => <Time at={w.created_at} /> },
            {
              header: 'Actions',
              actions: true,
              cell: (w) => (
                <button
                  type="button"
                  onClick={() => {
                    remove.reset();
                    setRemoving({ id: w.id, url: w.url });
                  }}
                  aria-label={`Remove the webhook to ${w.url}`}
                >
                  Remove
                </button>
              ),
            },
          ]}
        />
      )}
      {removing && (
        <Confirm
          id="confirm-remove-webhook-title"
          title={`Stop sending events to ${removing.url}?`}
          action="Remove the webhook"
          busyAction="Removing…"
          keep="Cancel"
          submit={{ busy: remove.busy, error: remove.error, run: () => remove.pick(removing.id) }}
          onKeep={() => setRemoving(null)}
        >
          Its pending deliveries are dropped. Subscribing the URL again gives it a new secret.
        </Confirm>
      )}
      {created && (
        <ShownOnce id="webhook-secret" value={created.secret} what="the signing secret">
          Subscribed {created.url}. Its signing secret is shown only now: keep it where the receiver verifies
          deliveries.
        </ShownOnce>
      )}
      <h2>Subscribe a URL</h2>
      <form class="card" onSubmit={subscribe.run} noValidate>
        <FormErrors
          error={subscribe.error}
          unplaced={Object.entries(subscribe.errors).filter(([f]) => f !== 'url' && f !== 'description')}
        />
        <div class="grid-2">
          <TextField
            id="webhook-url"
            label="URL"
            required
            value={url}
            onInput={setUrl}
            error={subscribe.errors.url}
            hint="https://…; an address on this machine or a private network needs BERTH_WEBHOOK_ALLOW_PRIVATE"
            attrs={{ spellcheck: false }}
          />
          <TextField
            id="webhook-description"
            label="Description"
            value={description}
            onInput={setDescription}
            error={subscribe.errors.description}
          />
        </div>
        <fieldset>
          <legend>Events (none ticked: every event)</legend>
          <div class="checks">
            {EVENT_TYPES.map((type) => (
              <label class="check" key={type}>
                <input
                  type="checkbox"
                  name="event-types"
                  value={type}
                  checked={types.includes(type)}
                  onChange={(e) => toggle(type, e.currentTarget.checked)}
                />
                <code>{type}</code>
              </label>
            ))}
          </div>
        </fieldset>
        <div class="form-actions">
          <button type="submit" class="primary" disabled={subscribe.busy}>
            {subscribe.busy ? 'Subscribing…' : 'Subscribe'}
          </button>
        </div>
      </form>
    </Page>
  );
}

/** One subscription's deliveries, newest first: what the receiver answered, and sending one again. */
export function WebhookDeliveries(props: { webhookId: string }) {
  const { webhookId } = props;
  const webhook = useLoad(
    async () =>
      unwrap(await api().GET('/v1/webhooks/{webhookId}', { params: { path: { webhookId } } })).webhook,
    [webhookId],
  );
  const pages = usePages();
  const deliveries = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/webhooks/{webhookId}/deliveries', {
          params: {
            path: { webhookId },
            query: { limit: DELIVERIES_PAGE, ...(pages.cursor && { cursor: pages.cursor }) },
          },
        }),
      ),
    [webhookId, pages.cursor],
    { refreshMs: REFRESH_MS },
  );
  const redeliver = useItemSubmit(
    async (deliveryId) =>
      unwrap(
        await api().POST('/v1/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver', {
          params: { path: { webhookId, deliveryId } },
          body: {},
        }),
      ),
    deliveries.reload,
  );
  const data = deliveries.data;
  return (
    <Page title={webhook.data ? `Deliveries to ${webhook.data.url}` : 'Deliveries'}>
      <p class="crumbs">
        <a href="#/webhooks">← Webhooks</a>
      </p>
      {webhook.error !== undefined && <ErrorBox error={webhook.error} onRetry={webhook.reload} />}
      {deliveries.error ? (
        <ErrorBox error={deliveries.error} onRetry={deliveries.reload} />
      ) : deliveries.loading && !data ? (
        <Loading what="the deliveries" />
      ) : !data?.deliveries.length ? (
        <Empty>Nothing delivered yet: each event the subscription wants appears here.</Empty>
      ) : (
        <>
          <DataTable
            label="Deliveries, newest first"
            rows={data.deliveries}
            keyOf={(d) => d.id}
            columns={[
              { header: 'Created', cell: (d) => <Time at={d.created_at} /> },
              { header: 'Event', cell: (d) => <code>{d.event_type}</code> },
              { header: 'State', cell: (d) => <StateBadge state={d.state} /> },
              { header: 'Attempts', cell: (d) => d.attempts },
              {
                header: 'Answer',
                cell: (d) => (
                  <>
                    {d.response_code ?? <span class="muted">none</span>}
                    {d.last_error && <span class="field-error"> {d.last_error}</span>}
                  </>
                ),
              },
              {
                header: 'Actions',
                actions: true,
                cell: (d) =>
                  d.state !== 'pending' && (
                    <button
                      type="button"
                      onClick={() => redeliver.pick(d.id)}
                      disabled={redeliver.busy}
                      aria-label={`Send again the ${d.event_type} delivery of ${new Date(d.created_at).toLocaleString()}`}
                    >
                      Send again
                    </button>
                  ),
              },
            ]}
          />
          {redeliver.error !== undefined && <ErrorBox error={redeliver.error} />}
          <Pager page={pages.page} nextCursor={data.next_cursor} pages={pages} label="Deliveries" />
        </>
      )}
    </Page>
  );
}

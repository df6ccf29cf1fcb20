/**
 * The account's webhooks (docs/events.md): subscribe a URL to events, list and remove subscriptions,
 * read their deliveries and send one again. The signing secret is printed by `create` only.
 * @module
 */
import { type Command, Option } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { EVENT_TYPES } from '../../domain/events.ts';
import { isUuid } from '../../domain/uuid.ts';
import { withExamples } from '../help.ts';
import { common, noteNextPage, type PageOptions, paged, pageQuery, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { type Column, stateText } from './output.ts';

type Webhook =
  paths['/v1/webhooks']['get']['responses'][200]['content']['application/json']['data']['webhooks'][number];
type Delivery =
  paths['/v1/webhooks/{webhookId}/deliveries']['get']['responses'][200]['content']['application/json']['data']['deliveries'][number];

const WEBHOOK_COLUMNS: Column<Webhook>[] = [
  { header: 'ID', value: (w) => w.id },
  { header: 'URL', value: (w) => w.url },
  { header: 'EVENTS', value: (w) => (w.event_types.length === 0 ? 'all' : w.event_types.join(',')) },
  { header: 'DESCRIPTION', value: (w) => w.description },
  { header: 'CREATED', value: (w) => w.created_at },
];

const WEBHOOK_FIELDS = ['id', 'url', 'event_types', 'description', 'created_at'];

const DELIVERY_COLUMNS: Column<Delivery>[] = [
  { header: 'ID', value: (d) => d.id },
  { header: 'EVENT', value: (d) => `${d.event_id} ${d.event_type}` },
  { header: 'STATE', value: (d) => stateText(d.state) },
  { header: 'ATTEMPTS', value: (d) => d.attempts },
  { header: 'STATUS', value: (d) => d.response_code ?? '' },
  { header: 'UPDATED', value: (d) => d.updated_at },
  { header: 'LAST ERROR', value: (d) => d.last_error },
];

/** An id argument, checked before asking: the API would answer a field error on its path instead. */
function idOf(value: string, what: string, list: string): string {
  if (!isUuid(value)) throw new CliError(`"${value}" is not a ${what} id (${list} lists them)`, EXIT.usage);
  return value;
}

export function webhookCommands(program: Command): void {
  const webhooks = withExamples(
    program
      .command('webhooks')
      .description("the account's webhooks: events POSTed to a URL, signed (docs/events.md)"),
    'webhooks ls',
  );
  withExamples(
    common(
      webhooks
        .command('create <url>')
        .description('subscribe a URL to events; the signing secret is printed once and never again')
        .addOption(
          new Option('--events <type...>', 'the event types to deliver (default: all)').choices(EVENT_TYPES),
        )
        .option('--description <text>', 'what the webhook is for'),
      { env: false },
    ),
    'webhooks create https://hooks.example.com/berth',
    'webhooks create https://pager.example.com/in --events alert.opened alert.resolved --description pager',
  ).action(
    withSession<[string], { events?: string[]; description?: string }>(async (session, [url], o) => {
      const data = unwrap(
        await session.api.POST('/v1/webhooks', {
          body: {
            url,
            event_types: o.events as Webhook['event_types'] | undefined,
            description: o.description,
          },
        }),
      );
      session.out.item(data.webhook, [...WEBHOOK_FIELDS.slice(0, -1), 'secret', 'created_at'], data);
      session.out.notice('keep the secret: it verifies each delivery, and is not shown again');
    }),
  );
  withExamples(
    common(webhooks.command('ls').description("the account's webhooks (never their secrets)"), {
      env: false,
    }),
    'webhooks ls',
    'webhooks ls -o json',
  ).action(
    withSession(async (session) => {
      const data = unwrap(await session.api.GET('/v1/webhooks'));
      session.out.list(data.webhooks, WEBHOOK_COLUMNS, data);
    }),
  );
  withExamples(
    common(webhooks.command('get <webhookId>').description('a webhook (never its secret)'), { env: false }),
    'webhooks get <webhookId>',
  ).action(
    withSession(async (session, [id = '']) => {
      const data = unwrap(
        await session.api.GET('/v1/webhooks/{webhookId}', {
          params: { path: { webhookId: idOf(id, 'webhook', 'berth webhooks ls') } },
        }),
      );
      session.out.item(data.webhook, WEBHOOK_FIELDS, data);
    }),
  );
  withExamples(
    common(
      webhooks
        .command('delete <webhookId>')
        .description('stop deliveries at once (pending ones are dropped) and forget them'),
      { env: false },
    ),
    'webhooks delete <webhookId>',
  ).action(
    withSession(async (session, [id = '']) => {
      const data = unwrap(
        await session.api.DELETE('/v1/webhooks/{webhookId}', {
          params: { path: { webhookId: idOf(id, 'webhook', 'berth webhooks ls') } },
        }),
      );
      session.out.notice(`deleted webhook ${id}`);
      if (session.out.format !== 'table') session.out.item(data, undefined, data);
    }),
  );
  withExamples(
    paged(
      common(
        webhooks
          .command('deliveries <webhookId>')
          .description("a webhook's deliveries, newest first: state, attempts, the receiver's last status"),
        { env: false },
      ),
    ),
    'webhooks deliveries <webhookId>',
    'webhooks deliveries <webhookId> --limit 100 --cursor <cursor>',
  ).action(
    withSession<[string], PageOptions>(async (session, [id], o) => {
      const webhookId = idOf(id, 'webhook', 'berth webhooks ls');
      const data = unwrap(
        await session.api.GET('/v1/webhooks/{webhookId}/deliveries', {
          params: { path: { webhookId }, query: pageQuery(o) },
        }),
      );
      session.out.list(data.deliveries, DELIVERY_COLUMNS, data);
      noteNextPage(
        session,
        data.next_cursor,
        `webhooks deliveries ${webhookId}${o.limit ? ` --limit ${o.limit}` : ''}`,
      );
    }),
  );
  withExamples(
    common(
      webhooks
        .command('redeliver <webhookId> <deliveryId>')
        .description('send a delivery again (same webhook-id); refused while it is pending'),
      { env: false },
    ),
    'webhooks redeliver <webhookId> <deliveryId>',
  ).action(
    withSession<[string, string]>(async (session, [id, deliveryId]) => {
      const data = unwrap(
        await session.api.POST('/v1/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver', {
          params: {
            path: {
              webhookId: idOf(id, 'webhook', 'berth webhooks ls'),
              deliveryId: idOf(deliveryId, 'delivery', 'berth webhooks deliveries'),
            },
          },
          body: {},
        }),
      );
      session.out.notice(`redelivering ${deliveryId}`);
      session.out.item(data.delivery, undefined, data);
    }),
  );
}

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { WebhookBody } from '../../domain/inputs.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { createWebhook, redeliver, removeWebhook } from '../../domain/usecases/webhooks.ts';
import { MAX_WEBHOOKS } from '../../domain/webhook-rules.ts';
import { listDeliveries, listWebhooks } from '../../store/repositories/webhooks.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { actorOf, authOf } from '../plugins/auth.ts';
import { webhookOf } from '../plugins/scope.ts';
import {
  AUTH_ERRORS,
  CLOSED,
  Envelope,
  errorResponses,
  NoQuery,
  pagedListSchema,
} from '../schemas/common.ts';
import {
  CreatedWebhook,
  DeliveryParams,
  Webhook,
  WebhookDelivery,
  WebhookParams,
} from '../schemas/webhooks.ts';
import { success, webhookDeliveryView, webhookView } from '../views.ts';

export const webhookRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  const db = deps.store.db;

  app.post(
    '/webhooks',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Create Webhook',
        description:
          "Subscribes a URL to the account's events (docs/events.md), delivered as POSTs signed the Standard " +
          'Webhooks way (webhook-id, webhook-timestamp, webhook-signature) with the `secret` this answer shows ' +
          `once. At most ${MAX_WEBHOOKS} per account (409). A URL whose host is or resolves to a private, ` +
          'loopback or link-local address is a 422 unless the server allows it (BERTH_WEBHOOK_ALLOW_PRIVATE).',
        body: WebhookBody,
        response: {
          200: Envelope(Type.Object({ webhook: CreatedWebhook })),
          ...errorResponses(...AUTH_ERRORS, 409, 422),
        },
      },
    },
    async (request) => {
      const { webhook, secret } = await createWebhook(deps, actorOf(request), request.body);
      return success({ webhook: { ...webhookView(webhook), secret } });
    },
  );

  app.get(
    '/webhooks',
    {
      config: { role: 'viewer', wholeAccount: true },
      schema: {
        summary: "The account's webhooks",
        querystring: NoQuery,
        response: {
          200: Envelope(Type.Object({ webhooks: Type.Array(Webhook, { maxItems: MAX_WEBHOOKS }) })),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) =>
      success({ webhooks: (await listWebhooks(db, authOf(request).accountId)).map(webhookView) }),
  );

  app.get(
    '/webhooks/:webhookId',
    {
      config: { role: 'viewer', wholeAccount: true },
      schema: {
        summary: 'Get Webhook',
        params: WebhookParams,
        response: { 200: Envelope(Type.Object({ webhook: Webhook })), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    async (request) => success({ webhook: webhookView(webhookOf(request)) }),
  );

  app.delete(
    '/webhooks/:webhookId',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Delete Webhook',
        description: 'Stops deliveries at once (pending ones are dropped) and forgets its deliveries.',
        params: WebhookParams,
        response: { 200: Envelope(Type.Object({}, CLOSED)), ...errorResponses(...AUTH_ERRORS) },
      },
    },
    async (request) => {
      await removeWebhook(deps, actorOf(request), webhookOf(request));
      return success({});
    },
  );

  app.get(
    '/webhooks/:webhookId/deliveries',
    {
      config: { role: 'viewer', wholeAccount: true },
      schema: {
        summary: "A webhook's deliveries, newest first",
        description:
          'Each event the webhook wanted: its state (pending, succeeded, failed), attempts, the last response ' +
          'code and error. Kept as long as their events (BERTH_EVENT_RETENTION_HOURS).',
        params: WebhookParams,
        ...pagedListSchema('deliveries', WebhookDelivery),
      },
    },
    async (request) => {
      const page = await listDeliveries(db, webhookOf(request).id, pageOf(request.query));
      return success({ deliveries: page.items.map(webhookDeliveryView), next_cursor: nextCursor(page.next) });
    },
  );

  app.post(
    '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    {
      config: { role: 'admin', wholeAccount: true },
      schema: {
        summary: 'Redeliver',
        description:
          'Sends a delivery again, with the same webhook-id (receivers drop repeats by it), as a new round of ' +
          'attempts. 409 while it is still pending, or once its event is past retention.',
        params: DeliveryParams,
        body: Type.Optional(Type.Object({}, CLOSED)),
        response: {
          200: Envelope(Type.Object({ delivery: WebhookDelivery })),
          ...errorResponses(...AUTH_ERRORS, 409, 422),
        },
      },
    },
    async (request) => {
      const delivery = await redeliver(deps, actorOf(request), webhookOf(request), request.params.deliveryId);
      return success({ delivery: webhookDeliveryView(delivery) });
    },
  );
};

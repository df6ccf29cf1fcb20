import { Type } from 'typebox';
import { EVENT_TYPES } from '../../domain/events.ts';
import { WEBHOOK_ATTEMPTS } from '../../domain/webhook-rules.ts';
import { DateTime, Nullable, StringEnum, Uuid } from './common.ts';

export const Webhook = Type.Object({
  id: Uuid,
  url: Type.String({ maxLength: 2100 }),
  event_types: Type.Array(StringEnum(EVENT_TYPES, { maxLength: 40 }), {
    maxItems: EVENT_TYPES.length,
    description: 'empty: every type',
  }),
  description: Type.String({ maxLength: 300 }),
  created_at: DateTime,
});

/** The create answer: the only time the signing secret is shown. */
export const CreatedWebhook = Type.Object({
  ...Webhook.properties,
  secret: Type.String({
    maxLength: 100,
    description: 'whsec_...: verifies each delivery (Standard Webhooks); shown only now, stored sealed',
  }),
});

export const WebhookDelivery = Type.Object({
  id: Uuid,
  webhook_id: Uuid,
  event_id: Type.String({ maxLength: 19, description: 'the event delivered (its id in GET /v1/events)' }),
  event_type: StringEnum(EVENT_TYPES, { maxLength: 40 }),
  state: StringEnum(['pending', 'succeeded', 'failed'] as const, {
    maxLength: 20,
    description: `pending while being tried (at most ${WEBHOOK_ATTEMPTS} attempts), then succeeded or failed`,
  }),
  attempts: Type.Integer({ minimum: 0 }),
  response_code: Nullable(Type.Integer({ description: "the receiver's last HTTP status; null: no answer" })),
  last_error: Type.String({ maxLength: 2000 }),
  created_at: DateTime,
  updated_at: DateTime,
});

export const WebhookParams = Type.Object({ webhookId: Uuid });
export const DeliveryParams = Type.Object({ webhookId: Uuid, deliveryId: Uuid });

import type { Db } from '../database.ts';
import type { EventRow, WebhookDeliveryRow, WebhookDeliveryState, WebhookRow } from '../schema.ts';
import { type Page, type Position, pageAfter } from './paging.ts';

export async function insertWebhook(
  db: Db,
  row: Pick<WebhookRow, 'id' | 'account_id' | 'url' | 'event_types' | 'description' | 'secret_sealed'>,
): Promise<WebhookRow> {
  return db.insertInto('webhooks').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function listWebhooks(db: Db, accountId: string): Promise<WebhookRow[]> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function countWebhooks(db: Db, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function findWebhook(db: Db, accountId: string, id: string): Promise<WebhookRow | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Removes a subscription and, with it (cascade), its deliveries; their jobs find nothing and end. */
export async function deleteWebhook(db: Db, id: string): Promise<void> {
  await db.deleteFrom('webhooks').where('id', '=', id).execute();
}

/** A webhook's deliveries, newest first. */
export async function listDeliveries(
  db: Db,
  webhookId: string,
  page: Page,
): Promise<{ items: WebhookDeliveryRow[]; next: Position | null }> {
  return pageAfter(
    db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId),
    'webhook_deliveries',
    page,
  );
}

export async function findDelivery(
  db: Db,
  webhookId: string,
  id: string,
): Promise<WebhookDeliveryRow | undefined> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** What a delivery job sends: the delivery, its subscription and its event (undefined once pruned). */
export async function deliveryTarget(
  db: Db,
  deliveryId: string,
): Promise<{ delivery: WebhookDeliveryRow; webhook: WebhookRow; event: EventRow | undefined } | undefined> {
  const delivery = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .executeTakeFirst();
  if (!delivery) return undefined;
  const webhook = await db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', delivery.webhook_id)
    .executeTakeFirst();
  if (!webhook) return undefined;
  const event = await db
    .selectFrom('events')
    .selectAll()
    .where('seq', '=', delivery.event_seq)
    .executeTakeFirst();
  return { delivery, webhook, event };
}

/** Records one attempt's outcome. */
export async function recordAttempt(
  db: Db,
  id: string,
  outcome: { state: WebhookDeliveryState; responseCode: number | null; error: string; attempts?: number },
): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      state: outcome.state,
      response_code: outcome.responseCode,
      last_error: outcome.error.slice(0, 2000),
      attempts: outcome.attempts ?? eb('attempts', '+', 1),
      updated_at: new Date(),
    }))
    .where('id', '=', id)
    .execute();
}

/** Puts a delivery back to pending for a redelivery; false when it is pending already. */
export async function reopenDelivery(db: Db, id: string): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({ state: 'pending', last_error: '', updated_at: new Date() })
    .where('id', '=', id)
    .where('state', '<>', 'pending')
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

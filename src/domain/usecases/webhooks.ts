import { randomBytes, randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { eventKept } from '../../store/repositories/events.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import {
  countWebhooks,
  deleteWebhook,
  findDelivery,
  insertWebhook,
  reopenDelivery,
} from '../../store/repositories/webhooks.ts';
import type { WebhookDeliveryRow, WebhookRow } from '../../store/schema.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { WebhookInput } from '../inputs.ts';
import {
  checkWebhookUrl,
  isPublicAddress,
  literalAddress,
  MAX_WEBHOOKS,
  WEBHOOK_ATTEMPTS,
} from '../webhook-rules.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';

const urlError = (error: string) => ValidationError.fields([{ field: 'url', error }]);

/**
 * Refuses a URL whose host is, or resolves to, an address that is not public (unless the operator
 * allows private ones). Checked again at every delivery, on the addresses the connection uses.
 */
async function checkReachable(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const hint = 'set BERTH_WEBHOOK_ALLOW_PRIVATE on the server to allow it';
  const literal = literalAddress(url);
  if (literal) {
    if (!isPublicAddress(literal)) throw urlError(`url is on a private address (${literal}): ${hint}`);
    return;
  }
  let addresses: { address: string }[];
  try {
    addresses = await lookup(url.hostname, { all: true });
  } catch {
    throw urlError(`url's host ${url.hostname} does not resolve`);
  }
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused) throw urlError(`url's host resolves to a private address (${refused.address}): ${hint}`);
}

/** A new subscription and its signing secret, which is shown this once (stored sealed). */
export async function createWebhook(
  deps: Pick<Deps, 'store' | 'secretBox' | 'config'>,
  actor: Actor,
  input: WebhookInput,
): Promise<{ webhook: WebhookRow; secret: string }> {
  const checked = checkWebhookUrl(input.url);
  if ('error' in checked) throw ValidationError.fields([checked.error]);
  await checkReachable(checked.url, deps.config.webhookAllowPrivate);
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const webhook = await deps.store.db.transaction().execute(async (trx) => {
    if ((await countWebhooks(trx, actor.accountId)) >= MAX_WEBHOOKS) {
      throw new ConflictError(`An account holds at most ${MAX_WEBHOOKS} webhooks: delete one first`);
    }
    const row = await insertWebhook(trx, {
      id: randomUUID(),
      account_id: actor.accountId,
      url: checked.url.toString(),
      event_types: input.event_types ?? [],
      description: input.description ?? '',
      secret_sealed: deps.secretBox.seal(secret),
    });
    await recordAudit(trx, actor, 'webhook.create', { id: row.id });
    return row;
  });
  return { webhook, secret };
}

export async function removeWebhook(
  deps: Pick<Deps, 'store'>,
  actor: Actor,
  webhook: WebhookRow,
): Promise<void> {
  await deps.store.db.transaction().execute(async (trx) => {
    await deleteWebhook(trx, webhook.id);
    await recordAudit(trx, actor, 'webhook.delete', { id: webhook.id });
  });
}

/**
 * Sends a delivery again (whatever became of it), with the same `webhook-id`: a new round of attempts.
 * 409 while it is still pending, or once its event is past retention.
 */
export async function redeliver(
  deps: Pick<Deps, 'store'>,
  actor: Actor,
  webhook: WebhookRow,
  deliveryId: string,
): Promise<WebhookDeliveryRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    const delivery = await findDelivery(trx, webhook.id, deliveryId);
    if (!delivery) throw new NotFoundError('Webhook delivery');
    if (!(await eventKept(trx, delivery.event_seq)))
      throw new ConflictError('The event of this delivery is past retention: it cannot be sent again');
    if (!(await reopenDelivery(trx, delivery.id))) {
      throw new ConflictError('This delivery is still pending: it is being tried already');
    }
    await enqueue(trx, {
      kind: 'deliver_webhook',
      subjectId: delivery.id,
      accountId: webhook.account_id,
      maxAttempts: WEBHOOK_ATTEMPTS,
    });
    await recordAudit(trx, actor, 'webhook.redeliver', { id: webhook.id });
    return { ...delivery, state: 'pending', last_error: '' };
  });
}

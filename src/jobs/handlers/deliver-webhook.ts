import { Webhook } from 'standardwebhooks';
import type { Deps } from '../../domain/usecases/context.ts';
import { maskedEvents } from '../../domain/usecases/event-masking.ts';
import { eventView } from '../../domain/usecases/projections.ts';
import { webhookRetryDelayMs } from '../../domain/webhook-rules.ts';
import { deliveryTarget, recordAttempt } from '../../store/repositories/webhooks.ts';
import { TerminalError } from '../errors.ts';
import { postJson, RefusedAddressError } from '../webhook-post.ts';
import type { JobHandler } from '../worker.ts';

/**
 * Sends one delivery: the event as JSON, signed the Standard Webhooks way (`webhook-id` the delivery's
 * id, the same on every attempt and redelivery, so a receiver can drop a repeat; `webhook-timestamp`;
 * `webhook-signature` v1, HMAC-SHA256 with the subscription's secret). A 2xx answer is a success;
 * anything else, or no answer, is retried with backoff. A refused (private) address is not retried.
 * At least once: a worker that dies after the receiver answered sends it again.
 */
export function deliverWebhookHandler(deps: Deps): JobHandler {
  const db = deps.store.db;
  return {
    async run(job, signal, claim) {
      const target = await deliveryTarget(db, job.subject_id);
      // The subscription was deleted: nothing to send.
      if (!target) return;
      const { delivery, webhook, event } = target;
      if (!event) throw new TerminalError('the event is past retention (BERTH_EVENT_RETENTION_HOURS)');
      const [shown] = await maskedEvents(db, deps.secretBox, [event]);
      const body = JSON.stringify(eventView(shown ?? event));
      const signer = new Webhook(deps.secretBox.open(webhook.secret_sealed));
      const sentAt = new Date();
      const headers = {
        'webhook-id': delivery.id,
        'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
        'webhook-signature': signer.sign(delivery.id, sentAt, body),
      };
      let status: number;
      try {
        status = await postJson(new URL(webhook.url), body, headers, deps.config.webhookAllowPrivate, signal);
      } catch (error) {
        const message = `no answer from the receiver: ${(error as Error).message}`;
        await recordAttempt(db, delivery.id, { state: 'pending', responseCode: null, error: message });
        throw error instanceof RefusedAddressError ? new TerminalError(message) : new Error(message);
      }
      if (status >= 200 && status < 300) {
        await db.transaction().execute(async (trx) => {
          await recordAttempt(trx, delivery.id, { state: 'succeeded', responseCode: status, error: '' });
          await claim.finish(trx);
        });
        return;
      }
      const message = `the receiver answered ${status}`;
      await recordAttempt(db, delivery.id, { state: 'pending', responseCode: status, error: message });
      throw new Error(message);
    },
    async fail(job, reason, claim) {
      const target = await deliveryTarget(db, job.subject_id);
      if (!target) return;
      await db.transaction().execute(async (trx) => {
        await recordAttempt(trx, job.subject_id, {
          state: 'failed',
          responseCode: target.delivery.response_code,
          error: reason,
          attempts: target.delivery.attempts,
        });
        await claim.finish(trx);
      });
    },
    retryDelayMs: (attempts) => webhookRetryDelayMs(deps.config.webhookRetryBaseMs, attempts),
  };
}

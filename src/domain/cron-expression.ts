/**
 * Cron expressions, as the schedulers read them (croner): one check shared by a cron service's
 * `cron_schedule` and ops.json's `cron.cron_jobs[].schedule`.
 * @module
 */
import { Cron } from 'croner';

export function isCronExpression(expression: string): boolean {
  try {
    new Cron(expression, { paused: true }).stop();
    return true;
  } catch {
    return false;
  }
}

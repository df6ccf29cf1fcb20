/**
 * Deadlines on the Engine API calls of loops that run on their own (a cron tick, an ops.json cron job's
 * request, the ingress's table of replicas for HAProxy): such a loop waits for its step to end before
 * the next, so one call the daemon never answers would stop it for good, with nothing said. Past its deadline a call is abandoned, its step fails with
 * a warning, and the loop goes on. Streams (logs, pulls, events) and rollouts keep no such deadline.
 * @module
 */

/** One list, inspect, create, start or remove: the daemon answers these in milliseconds when well. */
export const ENGINE_CALL_MS = 30_000;

/** Options that abandon an Engine call after `ms` (dockerode passes them to its request, not the API). */
export function engineDeadline(ms: number): { abortSignal: AbortSignal } {
  return { abortSignal: AbortSignal.timeout(ms) };
}

// Runs in Node and in the console's browser bundle, so no node: modules. uuid, not crypto.randomUUID: a
// browser offers that only on https or localhost, and a console on http://10.0.0.5:8080 must still POST.
import { v4 as randomUUID } from 'uuid';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface RetryOptions {
  /** Tries in all, the first included (default 4). */
  attempts?: number;
  /** The first backoff when the server names none; doubles each try (default 250 ms). */
  baseDelayMs?: number;
  /** The longest wait between two tries, Retry-After included (default 30 s). */
  maxDelayMs?: number;
  /** How to wait (tests record the waits instead of waiting). */
  wait?: (ms: number) => Promise<unknown>;
}

/** The answers worth another try: rate limited, or the server (or a proxy before it) failed. */
export function isRetriedStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/** Retry-After in milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** A request that never reached the server, or whose answer was lost. */
export class UnreachableError extends Error {}

/**
 * Whether a request may be sent again after a 5xx or a lost answer, when it may already have been done:
 * a GET or HEAD, or one the server answers once per Idempotency-Key (docs/api.md: POSTs only). A PATCH,
 * PUT or DELETE has no key the server honours, so a second try could act twice (or undo a change made
 * in between).
 */
function safeToRepeat(request: Request): boolean {
  return request.method === 'GET' || request.method === 'HEAD' || request.headers.has('idempotency-key');
}

/**
 * A fetch that tries again on 429 (refused before anything was done), and on 5xx and when the server
 * cannot be reached if the request is safe to repeat (waiting what Retry-After says, else backing off).
 * A POST gets one Idempotency-Key for all its tries (unless the caller set one), so a retry of a POST
 * that was done (only its answer was lost) gets the first answer instead of doing it again. An abort is
 * never retried: the caller (or the browser, leaving the page) wanted the request stopped.
 */
export function retryingFetch(options: RetryOptions = {}, inner: typeof fetch = fetch) {
  const attempts = options.attempts ?? 4;
  const baseDelayMs = options.baseDelayMs ?? 250;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  const wait = options.wait ?? sleep;
  return async (request: Request): Promise<Response> => {
    if (request.method === 'POST' && !request.headers.has('idempotency-key')) {
      request.headers.set('idempotency-key', randomUUID());
    }
    for (let attempt = 1; ; attempt++) {
      const last = attempt === attempts;
      let delay = baseDelayMs * 2 ** (attempt - 1);
      try {
        const response = await inner(last ? request : request.clone());
        if (last || !isRetriedStatus(response.status)) return response;
        if (response.status !== 429 && !safeToRepeat(request)) return response;
        delay = retryAfterMs(response.headers.get('retry-after')) ?? delay;
        await response.body?.cancel();
      } catch (error) {
        if (request.signal.aborted || (error as Error).name === 'AbortError') throw error;
        if (last || !safeToRepeat(request)) {
          throw new UnreachableError(
            `Cannot reach Berth at ${new URL(request.url).origin} (${(error as Error).cause ?? (error as Error).message})`,
          );
        }
      }
      await wait(Math.min(delay, maxDelayMs));
    }
  };
}

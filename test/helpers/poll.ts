/** Thrown by a check when waiting longer cannot help (the process it waits on exited): ends the poll at once. */
export class StopPolling extends Error {}

/**
 * Polls until `check` returns a value other than undefined, or fails after the deadline. No fixed sleeps.
 * An error a check throws is taken as "not yet" (and reported at the deadline), but a StopPolling.
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  { timeoutMs = 60_000, intervalMs = 25 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      if (error instanceof StopPolling) throw error;
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * For tests of deadlines: a call that is never answered, and a wait with a limit.
 * @module
 */

/** A call the other side never answers (a Docker Engine, a socket): it ends only when abandoned. */
export function unanswered(options?: { abortSignal?: AbortSignal }): Promise<never> {
  return new Promise((_, reject) => {
    options?.abortSignal?.addEventListener('abort', () => reject(options.abortSignal?.reason));
  });
}

/** Settles as `work` does, or rejects "still waiting" once `ms` have passed: what a caller waits at most. */
export function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * The one way to say "do not try again": a failure that a retry cannot fix (a bad image name, a job that
 * exited non-zero, a health check that never passed). The jobs layer owns it: a handler or a provider
 * driver throws it, the worker records it on the job's subject at once. Every other error is retried
 * with backoff.
 */
export class TerminalError extends Error {
  override readonly name = 'TerminalError';
}

/**
 * A provider refused a change because a newer generation of the service already runs there (a worker
 * that lost its job resumed after another finished a newer deployment). Terminal: retrying cannot make
 * an older generation newer.
 */
export class SupersededError extends TerminalError {}

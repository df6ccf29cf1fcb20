/**
 * Runs `work` every `everyMs`, one round at a time (a slow round delays the next, never overlaps it),
 * without holding the process open. A failed round goes to `failed`; the next tick tries again.
 * `stop` ends the ticks and waits for the round in hand.
 */
export function repeatEvery(
  everyMs: number,
  work: () => Promise<unknown>,
  failed: (err: unknown) => void,
): { stop(): Promise<void> } {
  let round: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    round = round.then(work).then(() => undefined, failed);
  }, everyMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await round;
    },
  };
}

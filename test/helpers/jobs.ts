import type { JobClaim } from '../../src/jobs/worker.ts';

/**
 * The claim of a handler a test runs by hand, outside any worker: nothing else runs the job, so the claim
 * is never lost, and the job row stays for the test to look at.
 */
export const claimHeldByTest: JobClaim = {
  async hold() {},
  async finish() {},
  settled() {},
};

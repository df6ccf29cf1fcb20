/**
 * Stable, realistic identities for a simulated environment, derived from its id so that every process
 * and every restart sees the same values. NAT addresses come from the documentation ranges (RFC 5737),
 * which are never routed.
 * @module
 */
import { createHash } from 'node:crypto';
import type { EnvironmentIdentity, EnvironmentRef } from '../provider.ts';

const DOC_RANGES = ['192.0.2', '198.51.100', '203.0.113'];

/** The environment's simulated cloud account number (12 digits, as AWS's). */
export function simAccountNumber(env: Pick<EnvironmentRef, 'id'>): string {
  const digest = createHash('sha256').update(env.id).digest();
  return String(digest.readUInt32BE(4) * 1000 + (digest[8] ?? 0))
    .padStart(12, '0')
    .slice(0, 12);
}

export function simIdentity(env: EnvironmentRef): EnvironmentIdentity {
  const digest = createHash('sha256').update(env.id).digest();
  const short = digest.subarray(0, 4).toString('hex');
  const accountNumber = simAccountNumber(env);
  const nat = [0, 1].map(
    (i) => `${DOC_RANGES[(digest[9 + i] ?? 0) % 3]}.${1 + ((digest[11 + i] ?? 0) % 254)}`,
  );
  if (env.cloud === 'gcp') {
    const ingress = `${DOC_RANGES[(digest[13] ?? 0) % 3]}.${1 + ((digest[14] ?? 0) % 254)}`;
    return {
      ingress_host: ingress,
      ingress_url: `https://${ingress}`,
      public_nat_ips: nat,
      svc_role_arn: `berth-${short}@berth-sim-${env.region}.iam.gserviceaccount.com`,
    };
  }
  const ingress = `ingress-${short}.${env.region}.elb.berth.test`;
  return {
    ingress_host: ingress,
    ingress_url: `https://${ingress}`,
    public_nat_ips: nat,
    svc_role_arn: `arn:aws:iam::${accountNumber}:role/berth-${short}-svc`,
  };
}

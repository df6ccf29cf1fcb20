/**
 * What every certificate Berth orders shares, whichever table keeps it (a custom domain's in
 * `certificates`, the ingress domain's wildcard in `ingress_certificates`, the API's own in
 * `api_certificates`): when it is due, how an order's outcome is written to its row, when it renews and
 * how long a failed name waits. The three jobs differ only in their row's key, their challenge and what
 * else they record (events, the log).
 * @module
 */
import { X509Certificate } from 'node:crypto';
import type { Selectable, Updateable } from 'kysely';
import type { Deps } from '../domain/usecases/context.ts';
import type { ApiCertificatesTable } from '../store/schema.ts';
import type { ChallengeType } from './acme-challenges.ts';
import { describeOrderError, order } from './acme-order.ts';

/** The columns the three tables share. */
export type CertificateColumns = Updateable<ApiCertificatesTable>;
type CertificateState = Pick<
  Selectable<ApiCertificatesTable>,
  'name' | 'status' | 'cert_pem' | 'failures' | 'order_url' | 'order_key' | 'renew_after' | 'next_attempt_at'
>;

const DAY_MS = 86_400_000;

/** Issued: its renewal time has come. Otherwise: its failure's wait is over (none: at once). */
export function certificateDue(
  row: Pick<CertificateState, 'status' | 'renew_after' | 'next_attempt_at'>,
  now = Date.now(),
): boolean {
  if (row.status === 'issued') return (row.renew_after?.getTime() ?? 0) <= now;
  return (row.next_attempt_at?.getTime() ?? 0) <= now;
}

/** Two thirds into the lifetime, less up to a thirtieth of it at random (certificates issued together do not renew together). */
export function renewAfter(notBefore: Date, notAfter: Date, random = Math.random()): Date {
  const lifetime = notAfter.getTime() - notBefore.getTime();
  return new Date(notBefore.getTime() + (lifetime * 2) / 3 - random * (lifetime / 30));
}

/** How long a name waits after its `failures`th failed order: BERTH_ACME_RETRY_BASE_MS, doubling, at most a day (CAs' limits). */
export function retryWaitMs(failures: number, config: Pick<Deps['config'], 'acmeRetryBaseMs'>): number {
  return Math.min(DAY_MS, config.acmeRetryBaseMs * 2 ** (failures - 1));
}

/**
 * Orders the row's certificate, resuming its order in flight (a renewal is marked as one first, so its
 * read says so): the certificate, or the reason the order failed. `update` writes the row's columns.
 */
export async function orderCertificate(
  deps: Deps,
  row: CertificateState,
  update: (patch: CertificateColumns) => Promise<unknown>,
  challenge: ChallengeType,
  signal: AbortSignal,
): Promise<{ pem: string; keyPem: string } | { failed: string }> {
  if (row.cert_pem && row.status !== 'renewing') await update({ status: 'renewing' });
  let issued: { pem: string; keyPem: string };
  try {
    const subject = { names: [row.name], order_url: row.order_url, order_key: row.order_key, save: update };
    issued = await order(deps, subject, challenge, signal);
  } catch (error) {
    // A lost lease: the worker that took the job over resumes the order, and writes nothing of this run.
    signal.throwIfAborted();
    return { failed: describeOrderError(error, row.name, deps.config) };
  }
  signal.throwIfAborted();
  return issued;
}

/** What the sim's certificates look like to their readers: an issuer and a lifetime, no PEM. */
export interface SimulatedCertificate {
  issuer: string;
  lifetimeMs: number;
}

/** The row of an issued certificate, sealed, with its renewal time; the order in flight and the failures cleared. */
export function issuedColumns(
  box: Deps['secretBox'],
  issued: { pem: string; keyPem: string } | SimulatedCertificate,
): CertificateColumns {
  const x509 = 'pem' in issued ? new X509Certificate(issued.pem) : null;
  const notBefore = x509 ? new Date(x509.validFrom) : new Date();
  const notAfter = x509
    ? new Date(x509.validTo)
    : new Date(notBefore.getTime() + (issued as SimulatedCertificate).lifetimeMs);
  return {
    status: 'issued',
    issuer: x509 ? x509.issuer.replaceAll('\n', ', ') : (issued as SimulatedCertificate).issuer,
    not_before: notBefore,
    not_after: notAfter,
    renew_after: renewAfter(notBefore, notAfter),
    cert_pem: 'pem' in issued ? box.seal(issued.pem) : null,
    private_key: 'pem' in issued ? box.seal(issued.keyPem) : null,
    order_url: null,
    order_key: null,
    last_error: null,
    failures: 0,
    next_attempt_at: null,
  };
}

/**
 * The row after a failed order: the CA's reason, one more failure and its wait. A name that has a
 * certificate keeps serving it (only its renewal failed); an order the CA found invalid cannot be
 * finished, so the next attempt starts a new one.
 */
export function failedColumns(
  row: Pick<CertificateState, 'cert_pem' | 'failures'>,
  reason: string,
  config: Pick<Deps['config'], 'acmeRetryBaseMs'>,
): CertificateColumns {
  const failures = row.failures + 1;
  return {
    status: row.cert_pem ? 'renewing' : 'failed',
    last_error: reason.slice(0, 2000),
    failures,
    next_attempt_at: new Date(Date.now() + retryWaitMs(failures, config)),
    order_url: null,
    order_key: null,
  };
}

/**
 * Certificates for custom domains, by ACME (RFC 8555, through `acme-client`), against
 * BERTH_ACME_DIRECTORY_URL. A verified domain gets a `certificates` row and an `issue_certificate` job;
 * the job orders the certificate (jobs/acme-order.ts), answers the CA's HTTP-01 or TLS-ALPN-01 challenges
 * (BERTH_ACME_CHALLENGE) through the ingress (which reads `acme_challenges` through the
 * CertificateSource), and stores the certificate and its key sealed.
 *
 * - One order per name: the jobs of a certificate share a queue key (one runs at a time, across
 *   processes) and the job's lease fences the worker. The order's URL and its key are stored before any
 *   challenge is answered, so a run that dies mid-order (SIGKILL) resumes that order.
 * - A failed order records the CA's reason in `last_error` and waits (BERTH_ACME_RETRY_BASE_MS, doubling,
 *   at most a day) before the renewal scan queues it again: CAs limit failed validations per name.
 * - Renewal at two thirds of the lifetime, less a random part of a thirtieth (so certificates issued
 *   together do not renew together); the old certificate serves until the new one is stored.
 * @module
 */

import { X509Certificate } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { certificatesOn } from '../domain/usecases/certificates.ts';
import type { Deps } from '../domain/usecases/context.ts';
import type { CertificateSource } from '../providers/provider.ts';
import { queueApiCertificateIfDue } from '../store/repositories/api-certificates.ts';
import {
  deleteChallenges,
  findCertificate,
  findChallenge,
  queueDueCertificates,
  recordCertificateEvent,
  servingCertificate,
  updateCertificate,
} from '../store/repositories/certificates.ts';
import { findCustomDomainById } from '../store/repositories/custom-domains.ts';
import { servingWildcardCertificate } from '../store/repositories/ingress-certificates.ts';
import type { CertificateRow, JobRow } from '../store/schema.ts';
import { alpnChallengeCertificate } from './acme-challenges.ts';
import { describeOrderError, order } from './acme-order.ts';
import { repeatEvery } from './every.ts';
import type { JobClaim, JobHandler } from './worker.ts';

/** What the ingress serves: the stored certificates and challenge answers, opened with the master key. */
export function certificateSource(deps: Pick<Deps, 'store' | 'secretBox'>): CertificateSource {
  const { db } = deps.store;
  return {
    httpChallenge: (token) => findChallenge(db, token),
    alpnChallenge: (name) => alpnChallengeCertificate(deps, name),
    certificate: async (name) => {
      // A custom domain's own certificate, else the ingress domain's wildcard (DNS-01) covering the name.
      const row = (await servingCertificate(db, name)) ?? (await servingWildcardCertificate(db, name));
      if (!row?.cert_pem || !row.private_key) return null;
      return { cert: deps.secretBox.open(row.cert_pem), key: deps.secretBox.open(row.private_key) };
    },
  };
}

/**
 * Queues the certificates that are due (a renewal, a failure's wait over) every BERTH_ACME_SCAN_MS; runs
 * beside the workers (several processes at once is harmless).
 */
export function startCertificateRenewal(
  deps: Pick<Deps, 'store' | 'logger' | 'provider' | 'config'>,
  everyMs = deps.config.acmeScanMs,
): { stop(): Promise<void> } | null {
  if (!certificatesOn(deps)) return null;
  const log = deps.logger.child({ component: 'certificates' });
  return repeatEvery(
    everyMs,
    async () => {
      const queued = await queueDueCertificates(deps.store.db);
      if (queued > 0) log.info({ queued }, 'certificates queued for renewal or a new attempt');
      const name = deps.config.tlsAcmeName;
      if (name && (await queueApiCertificateIfDue(deps.store.db, name))) {
        log.info({ name }, "the API's certificate queued for renewal or a new attempt");
      }
    },
    (err) => log.warn({ err }, 'looking for certificates to renew failed'),
  );
}

/** Two thirds into the lifetime, less up to a thirtieth of it at random. */
export function renewAfter(notBefore: Date, notAfter: Date, random = Math.random()): Date {
  const lifetime = notAfter.getTime() - notBefore.getTime();
  return new Date(notBefore.getTime() + (lifetime * 2) / 3 - random * (lifetime / 30));
}

const DAY_MS = 86_400_000;

/** After a name's `failures`th failed order: BERTH_ACME_RETRY_BASE_MS, doubling, at most a day (CAs' limits). */
export function nextAttemptAt(failures: number, config: Pick<Deps['config'], 'acmeRetryBaseMs'>): Date {
  return new Date(Date.now() + Math.min(DAY_MS, config.acmeRetryBaseMs * 2 ** (failures - 1)));
}

/** What a sim certificate looks like: Let's Encrypt's 90 days, issued a moment after it is asked for. */
const SIM_LIFETIME_MS = 90 * DAY_MS;
const SIM_ISSUER = 'CN=Berth Simulated CA, O=Berth';
const SIM_ISSUE_DELAY_MS = 2_000;

function due(row: CertificateRow, now = Date.now()): boolean {
  if (row.status === 'issued') return (row.renew_after?.getTime() ?? 0) <= now;
  return (row.next_attempt_at?.getTime() ?? 0) <= now;
}

export function issueCertificateHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const box = deps.secretBox;

  /** Stores the certificate and serves it from now on: the last step, fenced by the job's claim. */
  async function store(
    row: CertificateRow,
    accountId: string,
    pem: string,
    keyPem: string,
    claim: JobClaim,
    issuer?: string,
  ) {
    const x509 = pem ? new X509Certificate(pem) : null;
    const notBefore = x509 ? new Date(x509.validFrom) : new Date();
    const notAfter = x509 ? new Date(x509.validTo) : new Date(notBefore.getTime() + SIM_LIFETIME_MS);
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      const stored = await updateCertificate(trx, row.custom_domain_id, {
        status: 'issued',
        issuer: x509 ? x509.issuer.replaceAll('\n', ', ') : (issuer ?? null),
        not_before: notBefore,
        not_after: notAfter,
        renew_after: renewAfter(notBefore, notAfter),
        cert_pem: pem ? box.seal(pem) : null,
        private_key: keyPem ? box.seal(keyPem) : null,
        order_url: null,
        order_key: null,
        last_error: null,
        failures: 0,
        next_attempt_at: null,
      });
      // A name that had a certificate (not_after is set for the sim's too) was renewed.
      const type = row.not_after ? 'certificate.renewed' : 'certificate.issued';
      if (stored) await recordCertificateEvent(trx, accountId, type, stored);
      await deleteChallenges(trx, row.name);
      await claim.finish(trx);
    });
  }

  async function failed(row: CertificateRow, accountId: string, reason: string, claim: JobClaim) {
    const failures = row.failures + 1;
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      const stored = await updateCertificate(trx, row.custom_domain_id, {
        // A name that has a certificate keeps serving it: only its renewal failed.
        status: row.cert_pem ? 'renewing' : 'failed',
        last_error: reason.slice(0, 2000),
        failures,
        next_attempt_at: nextAttemptAt(failures, deps.config),
        // An order the CA found invalid cannot be finished: the next attempt starts a new one.
        order_url: null,
        order_key: null,
      });
      if (stored) await recordCertificateEvent(trx, accountId, 'certificate.failed', stored);
      await deleteChallenges(trx, row.name);
      await claim.finish(trx);
    });
  }

  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const row = await findCertificate(db, job.subject_id);
      const domain = row && (await findCustomDomainById(db, row.custom_domain_id));
      // Nothing to do (the domain went, the certificate is not due): the job ends.
      if (!row || !domain || domain.state.startsWith('delete') || !due(row) || !certificatesOn(deps)) return;
      if (deps.provider.certificates === 'simulated') {
        await sleep(SIM_ISSUE_DELAY_MS, undefined, { signal });
        await store(row, domain.account_id, '', '', claim, SIM_ISSUER);
        return;
      }
      if (row.cert_pem && row.status !== 'renewing') {
        await updateCertificate(db, row.custom_domain_id, { status: 'renewing' });
      }
      let issued: { pem: string; keyPem: string };
      try {
        const subject = {
          names: [row.name],
          order_url: row.order_url,
          order_key: row.order_key,
          save: (patch: { order_url: string | null; order_key?: string }) =>
            updateCertificate(db, row.custom_domain_id, patch),
        };
        issued = await order(deps, subject, deps.config.acme?.challenge ?? 'http-01', signal);
      } catch (error) {
        // A lost lease: the worker that took the job over resumes the order.
        signal.throwIfAborted();
        await failed(row, domain.account_id, describeOrderError(error, row.name, deps.config), claim);
        return;
      }
      signal.throwIfAborted();
      await store(row, domain.account_id, issued.pem, issued.keyPem, claim);
    },
    async fail(job: JobRow, reason: string, claim) {
      const row = await findCertificate(db, job.subject_id);
      const domain = row && (await findCustomDomainById(db, row.custom_domain_id));
      if (row && domain) await failed(row, domain.account_id, reason, claim);
      else await db.transaction().execute((trx) => claim.finish(trx));
    },
  };
}

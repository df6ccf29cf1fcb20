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
import {
  type CertificateColumns,
  certificateDue,
  failedColumns,
  issuedColumns,
  orderCertificate,
  type SimulatedCertificate,
} from './certificate-state.ts';
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

/** What a sim certificate looks like: Let's Encrypt's 90 days, issued a moment after it is asked for. */
const SIMULATED = { issuer: 'CN=Berth Simulated CA, O=Berth', lifetimeMs: 90 * 86_400_000 };
const SIM_ISSUE_DELAY_MS = 2_000;

export function issueCertificateHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const box = deps.secretBox;

  /** Stores the certificate and serves it from now on: the last step, fenced by the job's claim. */
  async function store(
    row: CertificateRow,
    accountId: string,
    issued: { pem: string; keyPem: string } | SimulatedCertificate,
    claim: JobClaim,
  ) {
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      const stored = await updateCertificate(trx, row.custom_domain_id, issuedColumns(box, issued));
      // A name that had a certificate (not_after is set for the sim's too) was renewed.
      const type = row.not_after ? 'certificate.renewed' : 'certificate.issued';
      if (stored) await recordCertificateEvent(trx, accountId, type, stored);
      await deleteChallenges(trx, row.name);
      await claim.finish(trx);
    });
  }

  async function failed(row: CertificateRow, accountId: string, reason: string, claim: JobClaim) {
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      const stored = await updateCertificate(
        trx,
        row.custom_domain_id,
        failedColumns(row, reason, deps.config),
      );
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
      if (
        !row ||
        !domain ||
        domain.state.startsWith('delete') ||
        !certificateDue(row) ||
        !certificatesOn(deps)
      )
        return;
      if (deps.provider.certificates === 'simulated') {
        await sleep(SIM_ISSUE_DELAY_MS, undefined, { signal });
        await store(row, domain.account_id, SIMULATED, claim);
        return;
      }
      const update = (patch: CertificateColumns) => updateCertificate(db, row.custom_domain_id, patch);
      const issued = await orderCertificate(
        deps,
        row,
        update,
        deps.config.acme?.challenge ?? 'http-01',
        signal,
      );
      if ('failed' in issued) await failed(row, domain.account_id, issued.failed, claim);
      else await store(row, domain.account_id, issued, claim);
    },
    async fail(job: JobRow, reason: string, claim) {
      const row = await findCertificate(db, job.subject_id);
      const domain = row && (await findCustomDomainById(db, row.custom_domain_id));
      if (row && domain) await failed(row, domain.account_id, reason, claim);
      else await db.transaction().execute((trx) => claim.finish(trx));
    },
  };
}

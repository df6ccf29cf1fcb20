/**
 * The ingress domain's wildcard certificate (`*.{BERTH_INGRESS_HOST}`), by DNS-01 through RFC 2136
 * (BERTH_ACME_DNS_*): every service's own host name is served over HTTPS from its first deployment,
 * with no order of its own. Every environment of a docker or swarm Berth shares the ingress domain, so
 * one certificate covers them all.
 *
 * The same lifecycle as custom domains' certificates (jobs/certificates.ts): one `ingress_certificates`
 * row, jobs sharing its id as queue key (one order at a time across processes, resumed after a kill),
 * renewal at two thirds of the lifetime with jitter, failures waiting BERTH_ACME_RETRY_BASE_MS and
 * doubling. The row's state is in the log (component `certificates`), the failure's reason included.
 * @module
 */
import { ConfigError } from '../config.ts';
import type { Deps } from '../domain/usecases/context.ts';
import {
  ensureIngressCertificate,
  findIngressCertificate,
  queueDueIngressCertificate,
  updateIngressCertificate,
} from '../store/repositories/ingress-certificates.ts';
import type { IngressCertificateRow, JobRow } from '../store/schema.ts';
import {
  type CertificateColumns,
  certificateDue,
  failedColumns,
  issuedColumns,
  orderCertificate,
  retryWaitMs,
} from './certificate-state.ts';
import { repeatEvery } from './every.ts';
import type { JobClaim, JobHandler } from './worker.ts';

/** The wildcard this Berth orders, or null: DNS-01 is not configured, or the provider has no ingress. */
export function wildcardName(deps: Pick<Deps, 'provider' | 'config'>): string | null {
  const domain = deps.provider.ingressDomain;
  if (deps.provider.certificates !== 'acme' || !deps.config.acme?.dns || !domain) return null;
  return `*.${domain.toLowerCase()}`;
}

/**
 * Stops the start when DNS-01 is configured for a zone the ingress domain is not in: no order could
 * ever succeed.
 */
export function checkWildcardZone(deps: Pick<Deps, 'provider' | 'config'>): void {
  const name = wildcardName(deps);
  const zone = deps.config.acme?.dns?.zone;
  if (!name || !zone) return;
  const parent = name.slice(2);
  if (parent !== zone && !parent.endsWith(`.${zone}`)) {
    throw new ConfigError(
      `BERTH_ACME_DNS_ZONE (${zone}) must contain BERTH_INGRESS_HOST (${parent}): the wildcard ${name} is validated by a TXT record in that zone`,
    );
  }
}

/** Makes sure the wildcard is wanted, and queues its order or renewal whenever it is due (BERTH_ACME_SCAN_MS). */
export function startIngressCertificate(
  deps: Pick<Deps, 'store' | 'logger' | 'provider' | 'config'>,
  everyMs = deps.config.acmeScanMs,
): { stop(): Promise<void> } | null {
  const name = wildcardName(deps);
  if (!name) return null;
  const log = deps.logger.child({ component: 'certificates', name });
  let ensured = false;
  const tick = async () => {
    if (!ensured) {
      await ensureIngressCertificate(deps.store.db, name);
      ensured = true;
    }
    if ((await queueDueIngressCertificate(deps.store.db, name)) > 0) {
      log.info("the ingress domain's wildcard certificate is queued for an order");
    }
  };
  const failed = (err: unknown) =>
    log.warn({ err }, 'looking whether the wildcard certificate is due failed');
  // At once, not a minute after the start: services wait for this certificate to be served over HTTPS.
  const first = tick().catch(failed);
  const repeat = repeatEvery(everyMs, tick, failed);
  return {
    stop: async () => {
      await repeat.stop();
      await first;
    },
  };
}

export function issueIngressCertificateHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const box = deps.secretBox;
  const log = deps.logger.child({ component: 'certificates' });

  async function finish(row: IngressCertificateRow, patch: CertificateColumns, claim: JobClaim) {
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      await updateIngressCertificate(trx, row.id, patch);
      await claim.finish(trx);
    });
  }

  async function failed(row: IngressCertificateRow, reason: string, claim: JobClaim) {
    const failures = row.failures + 1;
    const waitMs = retryWaitMs(failures, deps.config);
    log.warn({ name: row.name, failures, retry_in_ms: waitMs, reason }, 'the wildcard certificate failed');
    await finish(row, failedColumns(row, reason, deps.config), claim);
  }

  return {
    async run(job: JobRow, signal: AbortSignal, claim) {
      const row = await findIngressCertificate(db, job.subject_id);
      // The wildcard is no longer this Berth's (another ingress host, DNS-01 off), or not due: done.
      if (!row || row.name !== wildcardName(deps) || !certificateDue(row)) return;
      const update = (patch: CertificateColumns) => updateIngressCertificate(db, row.id, patch);
      const issued = await orderCertificate(deps, row, update, 'dns-01', signal);
      if ('failed' in issued) {
        await failed(row, issued.failed, claim);
        return;
      }
      const patch = issuedColumns(box, issued);
      await finish(row, patch, claim);
      log.info({ name: row.name, not_after: patch.not_after }, 'the wildcard certificate is issued');
    },
    async fail(job: JobRow, reason: string, claim) {
      const row = await findIngressCertificate(db, job.subject_id);
      if (row) await failed(row, reason, claim);
      else await db.transaction().execute((trx) => claim.finish(trx));
    },
  };
}

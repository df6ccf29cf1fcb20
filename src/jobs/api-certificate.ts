/**
 * The API's own certificate by ACME, for BERTH_TLS_ACME_NAME: ordered like a custom domain's (the same
 * `order`, HTTP-01 answered by the ingress on port 80 from `acme_challenges`), stored sealed in
 * `api_certificates`, renewed at two thirds of its lifetime by the renewal scan, and served by the API's
 * HTTPS listener, which reads it again at most once a second (a renewal serves new connections at once).
 * @module
 */
import { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { ConfigError } from '../config.ts';
import type { Deps } from '../domain/usecases/context.ts';
import {
  ensureApiCertificate,
  findApiCertificate,
  queueApiCertificateIfDue,
  updateApiCertificate,
} from '../store/repositories/api-certificates.ts';
import { deleteChallenges } from '../store/repositories/certificates.ts';
import type { ApiCertificateRow, JobRow } from '../store/schema.ts';
import { describeOrderError, order } from './acme-order.ts';
import { nextAttemptAt, renewAfter } from './certificates.ts';
import type { JobClaim, JobHandler } from './worker.ts';

function due(row: ApiCertificateRow, now = Date.now()): boolean {
  if (row.status === 'issued') return (row.renew_after?.getTime() ?? 0) <= now;
  return (row.next_attempt_at?.getTime() ?? 0) <= now;
}

/**
 * At start, with BERTH_TLS_ACME_NAME: the name's row, and its order queued when it has no certificate
 * yet (or one due). Only a provider whose ingress answers HTTP-01 on port 80 can get it validated.
 */
export async function startApiCertificate(deps: Pick<Deps, 'store' | 'provider' | 'config'>): Promise<void> {
  const name = deps.config.tlsAcmeName;
  if (!name) return;
  if (deps.provider.certificates !== 'acme') {
    throw new ConfigError(
      'BERTH_TLS_ACME_NAME needs the docker or swarm provider: their ingress answers the CA on port 80',
    );
  }
  await ensureApiCertificate(deps.store.db, name);
  await queueApiCertificateIfDue(deps.store.db, name);
}

export function issueApiCertificateHandler(deps: Deps): JobHandler {
  const { db } = deps.store;
  const box = deps.secretBox;

  async function failed(row: ApiCertificateRow, reason: string, claim: JobClaim) {
    const failures = row.failures + 1;
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      await updateApiCertificate(trx, row.name, {
        status: row.cert_pem ? 'renewing' : 'failed',
        last_error: reason.slice(0, 2000),
        failures,
        next_attempt_at: nextAttemptAt(failures, deps.config),
        order_url: null,
        order_key: null,
      });
      await deleteChallenges(trx, row.name);
      await claim.finish(trx);
    });
  }

  return {
    async run(_job: JobRow, signal: AbortSignal, claim) {
      const name = deps.config.tlsAcmeName;
      const row = name ? await findApiCertificate(db, name) : undefined;
      if (!row || !due(row) || !deps.config.acme) return;
      if (row.cert_pem && row.status !== 'renewing') {
        await updateApiCertificate(db, row.name, { status: 'renewing' });
      }
      let issued: { pem: string; keyPem: string };
      try {
        const subject = {
          names: [row.name],
          order_url: row.order_url,
          order_key: row.order_key,
          save: (patch: { order_url: string | null; order_key?: string }) =>
            updateApiCertificate(db, row.name, patch),
        };
        // The challenge custom domains are validated with: the ingress answers it for any name.
        issued = await order(deps, subject, deps.config.acme?.challenge ?? 'http-01', signal);
      } catch (error) {
        signal.throwIfAborted();
        await failed(row, describeOrderError(error, row.name, deps.config), claim);
        return;
      }
      signal.throwIfAborted();
      const x509 = new X509Certificate(issued.pem);
      const notBefore = new Date(x509.validFrom);
      const notAfter = new Date(x509.validTo);
      await db.transaction().execute(async (trx) => {
        await claim.hold(trx);
        await updateApiCertificate(trx, row.name, {
          status: 'issued',
          issuer: x509.issuer.replaceAll('\n', ', '),
          not_before: notBefore,
          not_after: notAfter,
          renew_after: renewAfter(notBefore, notAfter),
          cert_pem: box.seal(issued.pem),
          private_key: box.seal(issued.keyPem),
          order_url: null,
          order_key: null,
          last_error: null,
          failures: 0,
          next_attempt_at: null,
        });
        await deleteChallenges(trx, row.name);
        await claim.finish(trx);
      });
    },
    async fail(_job: JobRow, reason: string, claim) {
      const name = deps.config.tlsAcmeName;
      const row = name ? await findApiCertificate(db, name) : undefined;
      if (row) await failed(row, reason, claim);
      else await db.transaction().execute((trx) => claim.finish(trx));
    },
  };
}

/** How long the served certificate is reused before the database is asked again. */
const REREAD_MS = 1000;

/**
 * The API listener's SNICallback: the stored certificate of BERTH_TLS_ACME_NAME, whatever name the client
 * asks for (the certificate says which it is for; the client checks). None stored yet: the handshake
 * fails, as at any host without a certificate, until the first order is done.
 */
export function apiCertificateSni(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  name: string,
  logger: Logger,
): NonNullable<tls.TlsOptions['SNICallback']> {
  let cached: { at: number; sealed: string | null; context: tls.SecureContext | null } | null = null;
  let reading: Promise<tls.SecureContext | null> | null = null;
  const read = async () => {
    const row = await findApiCertificate(deps.store.db, name);
    const sealed = row?.cert_pem && row.private_key ? row.cert_pem : null;
    let context = cached?.sealed === sealed ? (cached?.context ?? null) : null;
    if (sealed && !context && row?.private_key) {
      try {
        context = tls.createSecureContext({
          cert: deps.secretBox.open(sealed),
          key: deps.secretBox.open(row.private_key),
        });
      } catch (err) {
        logger.warn({ err, name }, "the API's stored certificate cannot serve TLS");
      }
    }
    cached = { at: Date.now(), sealed, context };
    return context;
  };
  return (_servername, callback) => {
    if (cached && Date.now() - cached.at < REREAD_MS) {
      callback(null, cached.context ?? undefined);
      return;
    }
    reading ??= read().finally(() => {
      reading = null;
    });
    reading.then(
      (context) => callback(null, context ?? undefined),
      (error: Error) => callback(error),
    );
  };
}

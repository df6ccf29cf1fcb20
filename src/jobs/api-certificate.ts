/**
 * The API's own certificate by ACME, for BERTH_TLS_ACME_NAME: ordered like a custom domain's (the same
 * `order`, HTTP-01 answered by the ingress on port 80 from `acme_challenges`), stored sealed in
 * `api_certificates`, renewed at two thirds of its lifetime by the renewal scan, and served by the API's
 * HTTPS listener, which reads it again at most once a second (a renewal serves new connections at once).
 * @module
 */
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
import {
  type CertificateColumns,
  certificateDue,
  failedColumns,
  issuedColumns,
  orderCertificate,
} from './certificate-state.ts';
import type { JobClaim, JobHandler } from './worker.ts';

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

  async function finish(row: ApiCertificateRow, patch: CertificateColumns, claim: JobClaim) {
    await db.transaction().execute(async (trx) => {
      await claim.hold(trx);
      await updateApiCertificate(trx, row.name, patch);
      await deleteChallenges(trx, row.name);
      await claim.finish(trx);
    });
  }

  return {
    async run(_job: JobRow, signal: AbortSignal, claim) {
      const name = deps.config.tlsAcmeName;
      const row = name ? await findApiCertificate(db, name) : undefined;
      if (!row || !certificateDue(row) || !deps.config.acme) return;
      const update = (patch: CertificateColumns) => updateApiCertificate(db, row.name, patch);
      // The challenge custom domains are validated with: the ingress answers it for any name.
      const issued = await orderCertificate(
        deps,
        row,
        update,
        deps.config.acme.challenge ?? 'http-01',
        signal,
      );
      await finish(
        row,
        'failed' in issued ? failedColumns(row, issued.failed, deps.config) : issuedColumns(box, issued),
        claim,
      );
    },
    async fail(_job: JobRow, reason: string, claim) {
      const name = deps.config.tlsAcmeName;
      const row = name ? await findApiCertificate(db, name) : undefined;
      if (row) await finish(row, failedColumns(row, reason, deps.config), claim);
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

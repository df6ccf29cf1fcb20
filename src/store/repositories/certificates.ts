import { sql, type Updateable } from 'kysely';
import type { CertificateEventType } from '../../domain/events.ts';
import type { Db } from '../database.ts';
import { recordEvent } from '../events.ts';
import { TOPICS } from '../notifications.ts';
import type { CertificateRow, CertificatesTable } from '../schema.ts';

/** A custom domain's certificate starts `pending`; once there, asking again changes nothing. */
export async function ensureCertificate(
  db: Db,
  row: { customDomainId: string; serviceId: string; name: string },
): Promise<void> {
  await db
    .insertInto('certificates')
    .values({
      custom_domain_id: row.customDomainId,
      service_id: row.serviceId,
      name: row.name,
      status: 'pending',
    })
    .onConflict((oc) => oc.column('custom_domain_id').doNothing())
    .execute();
}

export async function findCertificate(db: Db, customDomainId: string): Promise<CertificateRow | undefined> {
  return db
    .selectFrom('certificates')
    .selectAll()
    .where('custom_domain_id', '=', customDomainId)
    .executeTakeFirst();
}

export async function updateCertificate(
  db: Db,
  customDomainId: string,
  patch: Updateable<CertificatesTable>,
): Promise<CertificateRow | undefined> {
  return db
    .updateTable('certificates')
    .set({ ...patch, updated_at: sql`now()` })
    .where('custom_domain_id', '=', customDomainId)
    .returningAll()
    .executeTakeFirst();
}

/** A certificate as its events carry it: what the domain's read shows as `certificate`, and whose it is. */
export function certificateData(row: CertificateRow) {
  return {
    custom_domain_id: row.custom_domain_id,
    service_id: row.service_id,
    domain: row.name,
    status: row.status,
    issuer: row.issuer,
    not_before: row.not_before?.toISOString() ?? null,
    not_after: row.not_after?.toISOString() ?? null,
    renew_after: row.renew_after?.toISOString() ?? null,
    last_error: row.last_error,
  };
}

/** Records a certificate's issue, renewal or failure (GET /v1/events, webhooks), in the change's transaction. */
export async function recordCertificateEvent(
  trx: Db,
  accountId: string,
  type: CertificateEventType,
  row: CertificateRow,
): Promise<void> {
  await recordEvent(trx, accountId, type, certificateData(row));
}

export async function deleteCertificate(db: Db, customDomainId: string): Promise<void> {
  await db.deleteFrom('certificates').where('custom_domain_id', '=', customDomainId).execute();
}

/** The certificate serving `name` now (sealed), if one was issued. */
export async function servingCertificate(
  db: Db,
  name: string,
): Promise<Pick<CertificateRow, 'cert_pem' | 'private_key' | 'not_after'> | undefined> {
  return db
    .selectFrom('certificates')
    .select(['cert_pem', 'private_key', 'not_after'])
    .where('name', '=', name)
    .where('cert_pem', 'is not', null)
    .orderBy('not_after', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/**
 * Queues an order for every certificate that is due (a renewal time passed, a failure's wait over) and
 * has no job yet. Several processes may run it at once: the jobs of one certificate share a queue key,
 * so a second one runs after the first and finds nothing left to do.
 */
export async function queueDueCertificates(db: Db): Promise<number> {
  const result = await sql`
    WITH queued AS (
      INSERT INTO jobs (kind, subject_id, account_id, queue_key, max_attempts)
      SELECT 'issue_certificate', c.custom_domain_id, d.account_id, c.custom_domain_id, 8
      FROM certificates c JOIN custom_domains d ON d.id = c.custom_domain_id
      WHERE ((c.status = 'issued' AND c.renew_after <= now())
          OR (c.status <> 'issued' AND coalesce(c.next_attempt_at, now()) <= now()))
        AND NOT EXISTS (
          SELECT 1 FROM jobs j WHERE j.kind = 'issue_certificate' AND j.subject_id = c.custom_domain_id)
      RETURNING seq)
    SELECT count(*)::int AS queued, pg_notify(${TOPICS.jobs}, '') FROM queued`.execute(db);
  return (result.rows[0] as { queued: number } | undefined)?.queued ?? 0;
}

/** One account key per directory, whichever process made it first: the one every process then uses. */
export async function acmeAccountKey(
  db: Db,
  directoryUrl: string,
  sealedIfNew: () => string,
): Promise<string> {
  const found = await db
    .selectFrom('acme_accounts')
    .select('account_key')
    .where('directory_url', '=', directoryUrl)
    .executeTakeFirst();
  if (found) return found.account_key;
  await db
    .insertInto('acme_accounts')
    .values({ directory_url: directoryUrl, account_key: sealedIfNew() })
    .onConflict((oc) => oc.column('directory_url').doNothing())
    .execute();
  const row = await db
    .selectFrom('acme_accounts')
    .select('account_key')
    .where('directory_url', '=', directoryUrl)
    .executeTakeFirstOrThrow();
  return row.account_key;
}

export async function putChallenge(
  db: Db,
  challenge: {
    token: string;
    keyAuthorization: string;
    name: string;
    type: 'http-01' | 'tls-alpn-01';
    /** TLS-ALPN-01: the challenge certificate, and its key sealed. */
    alpn?: { certificate: string; key: string };
  },
) {
  const values = {
    key_authorization: challenge.keyAuthorization,
    type: challenge.type,
    alpn_certificate: challenge.alpn?.certificate ?? null,
    alpn_key: challenge.alpn?.key ?? null,
  };
  await db
    .insertInto('acme_challenges')
    .values({ token: challenge.token, name: challenge.name, ...values })
    .onConflict((oc) => oc.column('token').doUpdateSet(values))
    .execute();
}

/** The newest TLS-ALPN-01 answer for `name` (the key sealed). */
export async function findAlpnChallenge(
  db: Db,
  name: string,
): Promise<{ alpn_certificate: string; alpn_key: string } | undefined> {
  const row = await db
    .selectFrom('acme_challenges')
    .select(['alpn_certificate', 'alpn_key'])
    .where('name', '=', name)
    .where('type', '=', 'tls-alpn-01')
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.alpn_certificate && row.alpn_key
    ? { alpn_certificate: row.alpn_certificate, alpn_key: row.alpn_key }
    : undefined;
}

export async function deleteChallenge(db: Db, token: string): Promise<void> {
  await db.deleteFrom('acme_challenges').where('token', '=', token).execute();
}

export async function findChallenge(db: Db, token: string): Promise<string | null> {
  const row = await db
    .selectFrom('acme_challenges')
    .select('key_authorization')
    .where('token', '=', token)
    .where('type', '=', 'http-01')
    .executeTakeFirst();
  return row?.key_authorization ?? null;
}

export async function deleteChallenges(db: Db, name: string): Promise<void> {
  await db.deleteFrom('acme_challenges').where('name', '=', name).execute();
}

import { sql, type Updateable } from 'kysely';
import type { Db } from '../database.ts';
import { TOPICS } from '../notifications.ts';
import type { IngressCertificateRow, IngressCertificatesTable } from '../schema.ts';

/** The wildcard `name` starts `pending`; once there, asking again changes nothing. */
export async function ensureIngressCertificate(db: Db, name: string): Promise<void> {
  await db
    .insertInto('ingress_certificates')
    .values({ name, status: 'pending' })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
}

export async function findIngressCertificate(db: Db, id: string): Promise<IngressCertificateRow | undefined> {
  return db.selectFrom('ingress_certificates').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findIngressCertificateByName(
  db: Db,
  name: string,
): Promise<IngressCertificateRow | undefined> {
  return db.selectFrom('ingress_certificates').selectAll().where('name', '=', name).executeTakeFirst();
}

export async function updateIngressCertificate(
  db: Db,
  id: string,
  patch: Updateable<IngressCertificatesTable>,
): Promise<void> {
  await db
    .updateTable('ingress_certificates')
    .set({ ...patch, updated_at: sql`now()` })
    .where('id', '=', id)
    .execute();
}

/** The wildcard certificate `name` is covered by (`*.` and its parent), sealed, if one was issued. */
export async function servingWildcardCertificate(
  db: Db,
  name: string,
): Promise<Pick<IngressCertificateRow, 'cert_pem' | 'private_key' | 'not_after'> | undefined> {
  const dot = name.indexOf('.');
  if (dot <= 0) return undefined;
  return db
    .selectFrom('ingress_certificates')
    .select(['cert_pem', 'private_key', 'not_after'])
    .where('name', '=', `*${name.slice(dot)}`)
    .where('cert_pem', 'is not', null)
    .executeTakeFirst();
}

/**
 * Queues an order for the wildcard `name` when it is due (its renewal time passed, a failure's wait over)
 * and has no job yet. Several processes may run it at once: the certificate's jobs share a queue key.
 */
export async function queueDueIngressCertificate(db: Db, name: string): Promise<number> {
  const result = await sql`
    WITH queued AS (
      INSERT INTO jobs (kind, subject_id, queue_key, max_attempts)
      SELECT 'issue_ingress_certificate', c.id, c.id, 8
      FROM ingress_certificates c
      WHERE c.name = ${name}
        AND ((c.status = 'issued' AND c.renew_after <= now())
          OR (c.status <> 'issued' AND coalesce(c.next_attempt_at, now()) <= now()))
        AND NOT EXISTS (
          SELECT 1 FROM jobs j WHERE j.kind = 'issue_ingress_certificate' AND j.subject_id = c.id)
      RETURNING seq)
    SELECT count(*)::int AS queued, pg_notify(${TOPICS.jobs}, '') FROM queued`.execute(db);
  return (result.rows[0] as { queued: number } | undefined)?.queued ?? 0;
}

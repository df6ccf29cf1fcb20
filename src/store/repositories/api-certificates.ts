import { sql, type Updateable } from 'kysely';
import type { Db } from '../database.ts';
import { TOPICS } from '../notifications.ts';
import type { ApiCertificateRow, ApiCertificatesTable } from '../schema.ts';

/**
 * The job of the API's certificate: there is one API, so one fixed subject (jobs name a uuid) and queue
 * key, which also makes its orders one at a time across processes.
 */
export const API_CERTIFICATE_SUBJECT = '00000000-0000-4000-8000-000000000443';

/** The API's certificate for `name` starts `pending`; once there, asking again changes nothing. */
export async function ensureApiCertificate(db: Db, name: string): Promise<void> {
  await db
    .insertInto('api_certificates')
    .values({ name, status: 'pending' })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
}

export async function findApiCertificate(db: Db, name: string): Promise<ApiCertificateRow | undefined> {
  return db.selectFrom('api_certificates').selectAll().where('name', '=', name).executeTakeFirst();
}

export async function updateApiCertificate(
  db: Db,
  name: string,
  patch: Updateable<ApiCertificatesTable>,
): Promise<void> {
  await db
    .updateTable('api_certificates')
    .set({ ...patch, updated_at: sql`now()` })
    .where('name', '=', name)
    .execute();
}

/** Queues the order of the API's certificate when it is due (as queueDueCertificates does for domains). */
export async function queueApiCertificateIfDue(db: Db, name: string): Promise<boolean> {
  const result = await sql`
    WITH queued AS (
      INSERT INTO jobs (kind, subject_id, queue_key, max_attempts)
      SELECT 'issue_api_certificate', ${API_CERTIFICATE_SUBJECT}::uuid, ${API_CERTIFICATE_SUBJECT}, 8
      FROM api_certificates c
      WHERE c.name = ${name}
        AND ((c.status = 'issued' AND c.renew_after <= now())
          OR (c.status <> 'issued' AND coalesce(c.next_attempt_at, now()) <= now()))
        AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.kind = 'issue_api_certificate')
      RETURNING seq)
    SELECT count(*)::int AS queued, pg_notify(${TOPICS.jobs}, '') FROM queued`.execute(db);
  return ((result.rows[0] as { queued: number } | undefined)?.queued ?? 0) > 0;
}

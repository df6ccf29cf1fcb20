/**
 * The backup_failed alert: Berth's scheduled backup of its own state failing (jobs/backup-schedule.ts).
 * It is no service's, so it has no row in `alerts`: the open one is kept in `settings` (one at a time,
 * whichever process ran the failing tick), and each transition is an `alert.opened` / `alert.resolved`
 * event of every account, since the snapshot holds every account's services, secrets and settings.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Db } from '../database.ts';
import { recordEvent } from '../events.ts';

const KEY = 'backup_alert';

/** The alert as its events carry it (the service alerts' shape, with no service and no value). */
export interface BackupAlert {
  id: string;
  service_id: null;
  rule: 'backup_failed';
  state: 'open' | 'resolved';
  opened_at: string;
  resolved_at: string | null;
  value: null;
  message: string;
}

async function recordForEveryAccount(trx: Db, type: string, alert: BackupAlert): Promise<void> {
  const accounts = await trx.selectFrom('accounts').select('id').orderBy('id').execute();
  for (const { id } of accounts) await recordEvent(trx, id, type, { ...alert });
}

/** Opens the alert with `reason`, unless one is open already (a failure that goes on is one alert). */
export async function openBackupAlert(db: Db, reason: string, now: Date): Promise<BackupAlert | null> {
  return db.transaction().execute(async (trx) => {
    const alert: BackupAlert = {
      id: randomUUID(),
      service_id: null,
      rule: 'backup_failed',
      state: 'open',
      opened_at: now.toISOString(),
      resolved_at: null,
      value: null,
      message: `Berth's scheduled backup of its own state failed: ${reason}`.slice(0, 2000),
    };
    const { rows } = await sql`
      INSERT INTO settings (key, value) VALUES (${KEY}, ${JSON.stringify(alert)})
      ON CONFLICT (key) DO NOTHING RETURNING key`.execute(trx);
    if (rows.length === 0) return null;
    await recordForEveryAccount(trx, 'alert.opened', alert);
    return alert;
  });
}

/** Resolves the open alert, if any (one statement when there is none: every good backup runs it). */
export async function resolveBackupAlert(db: Db, now: Date): Promise<BackupAlert | null> {
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ value: string }>`
      DELETE FROM settings WHERE key = ${KEY} RETURNING value`.execute(trx);
    const [row] = rows;
    if (!row) return null;
    const alert: BackupAlert = {
      ...(JSON.parse(row.value) as BackupAlert),
      state: 'resolved',
      resolved_at: now.toISOString(),
    };
    await recordForEveryAccount(trx, 'alert.resolved', alert);
    return alert;
  });
}

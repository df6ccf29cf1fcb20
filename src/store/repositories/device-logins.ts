import type { Insertable } from 'kysely';
import type { Db } from '../database.ts';
import type { DeviceLoginsTable } from '../schema.ts';

/** A new device login; undefined when either code's hash is taken (the caller draws new codes). */
export async function insertDeviceLogin(db: Db, row: Insertable<DeviceLoginsTable>) {
  return db
    .insertInto('device_logins')
    .values(row)
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** Forgets device logins that expired before `before` (their codes may then be drawn again). */
export async function deleteDeviceLoginsExpiredBefore(db: Db, before: Date): Promise<void> {
  await db.deleteFrom('device_logins').where('expires_at', '<', before).execute();
}

/** The device login a CLI polls with this code, locked until the poll's transaction ends. */
export async function lockDeviceLogin(db: Db, deviceCodeHash: string) {
  return db
    .selectFrom('device_logins')
    .selectAll()
    .where('device_code_hash', '=', deviceCodeHash)
    .forUpdate()
    .executeTakeFirst();
}

export async function updateDeviceLogin(
  db: Db,
  id: string,
  set: Partial<{
    interval_s: number;
    last_polled_at: Date;
    state: 'collected';
    token_id: string;
  }>,
): Promise<void> {
  await db.updateTable('device_logins').set(set).where('id', '=', id).execute();
}

/** A device login still waiting for a person, by its user code. */
export async function findWaitingDeviceLogin(db: Db, userCodeHash: string) {
  return db
    .selectFrom('device_logins')
    .selectAll()
    .where('user_code_hash', '=', userCodeHash)
    .where('state', '=', 'pending')
    .where('expires_at', '>', new Date())
    .executeTakeFirst();
}

/** Approves or denies a waiting device login: only once, only before it expires (two at once: one wins). */
export async function decideDeviceLogin(
  db: Db,
  userCodeHash: string,
  decision: { state: 'approved' | 'denied'; account_id: string; user_id: string },
) {
  return db
    .updateTable('device_logins')
    .set({ ...decision, decided_at: new Date() })
    .where('user_code_hash', '=', userCodeHash)
    .where('state', '=', 'pending')
    .where('expires_at', '>', new Date())
    .returningAll()
    .executeTakeFirst();
}

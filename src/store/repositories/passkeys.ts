import type { Db } from '../database.ts';
import type { WebauthnChallengesTable } from '../schema.ts';

export async function insertPasskey(
  db: Db,
  row: {
    id: string;
    user_id: string;
    credential_id: string;
    public_key: string;
    counter: number;
    transports: string[];
    name: string;
  },
) {
  return db
    .insertInto('passkeys')
    .values({ ...row, transports: JSON.stringify(row.transports) })
    .onConflict((oc) => oc.column('credential_id').doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** A user's passkeys, oldest first. */
export async function listPasskeys(db: Db, userId: string) {
  return db
    .selectFrom('passkeys')
    .selectAll()
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function findPasskeyByCredential(db: Db, credentialId: string) {
  return db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId).executeTakeFirst();
}

/** Deletes one of a user's passkeys; undefined when it is not theirs. */
export async function deletePasskey(db: Db, userId: string, id: string) {
  return db
    .deleteFrom('passkeys')
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .returning(['id', 'name'])
    .executeTakeFirst();
}

/**
 * Moves the counter forward and notes the use, only from the counter the verification read: of two
 * sign-ins racing with the same counter, one moves it and the other finds nothing to update.
 */
export async function usePasskey(db: Db, id: string, from: string, to: number, now: Date) {
  return db
    .updateTable('passkeys')
    .set({ counter: to, last_used_at: now })
    .where('id', '=', id)
    .where('counter', '=', from as never)
    .returning(['id'])
    .executeTakeFirst();
}

/** Stores a new challenge; expired ones go on the way, so abandoned ceremonies leave no rows behind. */
export async function insertChallenge(db: Db, row: WebauthnChallengesTable) {
  await db.deleteFrom('webauthn_challenges').where('expires_at', '<', new Date()).execute();
  await db.insertInto('webauthn_challenges').values(row).execute();
}

/**
 * Uses a challenge up: only once, only before it expires, only for its purpose (and, for a registration,
 * only by its user). Whether it was there to use.
 */
export async function takeChallenge(
  db: Db,
  challenge: string,
  purpose: WebauthnChallengesTable['purpose'],
  userId: string | null,
): Promise<boolean> {
  const taken = await db
    .deleteFrom('webauthn_challenges')
    .where('challenge', '=', challenge)
    .where('purpose', '=', purpose)
    .where('expires_at', '>', new Date())
    .where((eb) => (userId === null ? eb('user_id', 'is', null) : eb('user_id', '=', userId)))
    .returning(['challenge'])
    .executeTakeFirst();
  return taken !== undefined;
}

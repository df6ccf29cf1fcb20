import { sql } from 'kysely';
import type { Role } from '../../domain/roles.ts';
import type { Db } from '../database.ts';

export async function findSsoConfig(db: Db, accountId: string) {
  return db.selectFrom('sso_configs').selectAll().where('account_id', '=', accountId).executeTakeFirst();
}

/** The enabled configurations that let this email domain sign in (one per account). */
export async function ssoConfigsForDomain(db: Db, domain: string) {
  return db
    .selectFrom('sso_configs')
    .selectAll()
    .where('enabled', '=', true)
    .where(sql<boolean>`allowed_domains @> ${JSON.stringify([domain])}::jsonb`)
    .orderBy('account_id')
    .execute();
}

export async function upsertSsoConfig(
  db: Db,
  row: {
    account_id: string;
    issuer_url: string;
    client_id: string;
    client_secret_sealed: string;
    allowed_domains: string[];
    default_role: Role;
    enabled: boolean;
  },
) {
  const values = { ...row, allowed_domains: JSON.stringify(row.allowed_domains) };
  return db
    .insertInto('sso_configs')
    .values(values)
    .onConflict((oc) =>
      oc.column('account_id').doUpdateSet({ ...values, account_id: undefined, updated_at: new Date() }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteSsoConfig(db: Db, accountId: string) {
  return db
    .deleteFrom('sso_configs')
    .where('account_id', '=', accountId)
    .returning(['account_id'])
    .executeTakeFirst();
}

export async function insertSsoFlow(
  db: Db,
  row: {
    state_hash: string;
    account_id: string;
    code_challenge: string;
    nonce: string;
    redirect_uri: string;
    expires_at: Date;
  },
) {
  await db.insertInto('sso_flows').values(row).execute();
}

/** Takes (deletes) the account's flow with this state, if it has not expired: a state works once. */
export async function takeSsoFlow(db: Db, accountId: string, stateHash: string) {
  return db
    .deleteFrom('sso_flows')
    .where('state_hash', '=', stateHash)
    .where('account_id', '=', accountId)
    .where('expires_at', '>', new Date())
    .returningAll()
    .executeTakeFirst();
}

/** Drops flows nobody came back from. */
export async function pruneSsoFlows(db: Db, now: Date): Promise<void> {
  await db.deleteFrom('sso_flows').where('expires_at', '<=', now).execute();
}

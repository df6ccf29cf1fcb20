import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { hashApiToken, newApiToken } from './domain/api-token.ts';
import { hashSecret, newSecret } from './domain/passwords.ts';
import type { Deps } from './domain/usecases/context.ts';
import { SIGN_IN_LINK_MS, signInLinkPath } from './domain/usecases/sessions.ts';
import { countAccounts, insertAccount, insertApiToken } from './store/repositories/accounts.ts';
import { insertEnvironment } from './store/repositories/environments.ts';
import { enqueue } from './store/repositories/jobs.ts';
import { insertSignInLink } from './store/repositories/sessions.ts';
import { insertUser, upsertMembership } from './store/repositories/users.ts';

export interface FirstStart {
  accountId: string;
  environmentId: string;
  apiToken: string;
  /** The email of the account's owner user (docs/access.md). */
  ownerEmail: string;
  /** Where the owner signs in once, to set a password (relative to the server's address; works a day). */
  ownerSignInPath: string;
}

/** The first owner's email; the operator creates other users (`berth admin users create`). */
export const FIRST_OWNER_EMAIL = 'owner@localhost';

/**
 * On an empty database: a `default` account on the `pro` plan, its owner user, one environment and one
 * API token (an operator token: it acts as owner), so a newcomer can curl at once. An advisory lock keeps two servers starting together from both doing it.
 */
export async function firstStart(deps: Deps): Promise<FirstStart | null> {
  return deps.store.db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(7342001)`.execute(trx);
    if ((await countAccounts(trx)) > 0) return null;
    const account = await insertAccount(trx, {
      id: randomUUID(),
      name: 'default',
      plan: 'pro',
      features: [],
    });
    const env = await insertEnvironment(trx, {
      id: randomUUID(),
      account_id: account.id,
      name: 'default',
      cloud: 'aws',
      region: 'us-east-1',
      state: 'provisioning',
    });
    await enqueue(trx, { kind: 'provision_environment', subjectId: env.id, accountId: account.id });
    const apiToken = newApiToken();
    await insertApiToken(trx, {
      id: randomUUID(),
      account_id: account.id,
      token_hash: hashApiToken(apiToken),
    });
    const owner = await insertUser(trx, {
      id: randomUUID(),
      email: FIRST_OWNER_EMAIL,
      display_name: 'Owner',
    });
    await upsertMembership(trx, {
      user_id: owner.id,
      account_id: account.id,
      role: 'owner',
      environment_ids: null,
    });
    const secret = newSecret();
    await insertSignInLink(trx, {
      id: randomUUID(),
      secret_hash: hashSecret(secret),
      user_id: owner.id,
      account_id: account.id,
      expires_at: new Date(Date.now() + SIGN_IN_LINK_MS),
    });
    return {
      accountId: account.id,
      environmentId: env.id,
      apiToken,
      ownerEmail: owner.email,
      ownerSignInPath: signInLinkPath(secret),
    };
  });
}

/**
 * BERTH_ADMIN_TOKEN, or the token saved in the data directory, or a new one: `save` writes a new one
 * (mode 0600), once the server could start, so that a start that fails leaves nothing behind.
 */
export function adminTokenFor(
  configured: string | undefined,
  dataDir: string,
): { token: string; generated: boolean; save(): void } {
  const nothing = () => {};
  if (configured) return { token: configured, generated: false, save: nothing };
  const file = path.join(dataDir, 'admin-token');
  if (fs.existsSync(file))
    return { token: fs.readFileSync(file, 'utf8').trim(), generated: false, save: nothing };
  const token = randomUUID();
  return {
    token,
    generated: true,
    save: () => {
      fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
    },
  };
}

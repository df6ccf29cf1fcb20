import { randomUUID } from 'node:crypto';
import type { EnvironmentIdentity } from '../../providers/provider.ts';
import { findAccount } from '../../store/repositories/accounts.ts';
import { insertEnvironment } from '../../store/repositories/environments.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import type { EnvironmentRow } from '../../store/schema.ts';
import { NotFoundError, ValidationError } from '../errors.ts';
import type { NewEnvironment } from '../inputs.ts';
import { DEFAULT_REGION, REGIONS } from '../regions.ts';
import { recordAudit } from './audit.ts';
import type { Actor, Deps } from './context.ts';

/** Live identity is read from the provider, cached this long so a burst of polls costs one read. */
export const IDENTITY_TTL_MS = 3000;
const identityCache = new Map<string, { at: number; identity: EnvironmentIdentity }>();

export async function liveIdentity(
  deps: Pick<Deps, 'store' | 'provider'>,
  env: EnvironmentRow,
): Promise<EnvironmentIdentity> {
  const cached = identityCache.get(env.id);
  if (cached && Date.now() - cached.at < IDENTITY_TTL_MS) return cached.identity;
  const identity = await deps.provider.identity(env);
  identityCache.set(env.id, { at: Date.now(), identity });
  return identity;
}

/** Operator action: the environment starts `provisioning`; a job makes it `available` through the provider. */
export async function createEnvironment(
  deps: Pick<Deps, 'store' | 'provider'>,
  actor: Actor,
  input: NewEnvironment,
): Promise<EnvironmentRow> {
  return deps.store.db.transaction().execute(async (trx) => {
    if (!(await findAccount(trx, actor.accountId))) throw new NotFoundError('Account');
    const cloud = input.cloud ?? 'aws';
    if (input.region !== undefined && !REGIONS[cloud].includes(input.region)) {
      throw ValidationError.fields([
        {
          field: 'region',
          error: `region must be one of the ${cloud} regions: ${REGIONS[cloud].join(', ')}`,
        },
      ]);
    }
    const env = await insertEnvironment(trx, {
      id: randomUUID(),
      account_id: actor.accountId,
      name: input.name,
      cloud,
      region: input.region ?? DEFAULT_REGION[cloud],
      state: 'provisioning',
    });
    await enqueue(trx, { kind: 'provision_environment', subjectId: env.id, accountId: env.account_id });
    await recordAudit(trx, actor, 'environment.create', { id: env.id, environmentId: env.id });
    return env;
  });
}

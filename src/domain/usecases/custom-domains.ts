import { randomBytes, randomUUID } from 'node:crypto';
import { DnsUnavailableError } from '../../dns.ts';
import { isUniqueViolation } from '../../store/database.ts';
import { ensureCertificate } from '../../store/repositories/certificates.ts';
import {
  domainTaken,
  findCustomDomainById,
  insertCustomDomain,
  newestDomainIn,
  transitionCustomDomain,
} from '../../store/repositories/custom-domains.ts';
import { enqueue } from '../../store/repositories/jobs.ts';
import type { CustomDomainRow, EnvironmentRow, ServiceRow } from '../../store/schema.ts';
import {
  checkDomainName,
  checkDomainServiceType,
  checkRecord,
  type DnsRecordSpec,
  dnsRecordsFor,
} from '../custom-domain-rules.ts';
import type { CustomDomainState } from '../custom-domain-states.ts';
import { ConflictError, DomainVerificationError, type FieldError, ValidationError } from '../errors.ts';
import type { CustomDomainInput } from '../inputs.ts';
import { recordAudit } from './audit.ts';
import { certificatesOn } from './certificates.ts';
import type { Actor, Deps } from './context.ts';
import { liveIdentity } from './environments.ts';
import { assertNotDeleting, lockLiveService } from './service-guards.ts';

/** States of a domain that is not serving yet and not retired: the "pending" one of a service. */
export const PENDING_STATES: CustomDomainState[] = [
  'unverified',
  'verified',
  'deploy_queued',
  'deploying',
  'deploy_failed',
];
const VERIFIABLE: CustomDomainState[] = ['unverified', 'deploy_failed'];
const RETIRED: CustomDomainState[] = ['delete_queued', 'deleting', 'deleted', 'delete_failed'];

const token = () => randomBytes(16).toString('hex');

/** The records a caller must create for a domain: the same on every read (the tokens are stored). */
export async function recordsOf(
  deps: Pick<Deps, 'store' | 'provider' | 'dns'>,
  env: EnvironmentRow,
  domain: CustomDomainRow,
): Promise<DnsRecordSpec[]> {
  const identity = await liveIdentity(deps, env);
  return dnsRecordsFor({
    domain: domain.domain,
    verifyToken: domain.verify_token,
    validationToken: domain.validation_token,
    cloud: env.cloud,
    ingressHost: identity.ingress_host,
    validationZone: deps.provider.domainValidationZone(env),
  });
}

export async function addCustomDomain(
  deps: Pick<Deps, 'store' | 'provider' | 'dns'>,
  actor: Actor,
  service: ServiceRow,
  body: CustomDomainInput,
): Promise<CustomDomainRow> {
  const checked = checkDomainName(body.domain);
  if ('error' in checked) throw ValidationError.fields([checked.error]);
  const untyped = checkDomainServiceType(service.type);
  if (untyped) throw ValidationError.fields([untyped]);
  assertNotDeleting(service);
  return deps.store.db.transaction().execute(async (trx) => {
    // The type again, as locked: a PATCH that changed it meanwhile saw no domain to keep.
    const lockedType = checkDomainServiceType((await lockLiveService(trx, service.id)).type);
    if (lockedType) throw ValidationError.fields([lockedType]);
    const taken = new ConflictError(`The domain ${checked.domain} is already registered`);
    if (await domainTaken(trx, checked.domain)) throw taken;
    // Two accounts racing for one name: the unique index decides, and the loser hears 409 too.
    const row = await insertCustomDomain(trx, {
      id: randomUUID(),
      account_id: service.account_id,
      environment_id: service.environment_id,
      service_id: service.id,
      domain: checked.domain,
      state: 'unverified',
      verify_token: token(),
      validation_token: token(),
    }).catch((error: unknown) => {
      throw isUniqueViolation(error) ? taken : error;
    });
    await recordAudit(trx, actor, 'custom_domain.create', {
      id: row.id,
      environmentId: service.environment_id,
    });
    return row;
  });
}

/** The domain now serving the service (or null) and the newest one not serving yet (or null). */
export async function domainPair(deps: Pick<Deps, 'store' | 'provider' | 'dns'>, service: ServiceRow) {
  const db = deps.store.db;
  const active = service.custom_domain_id
    ? await findCustomDomainById(db, service.custom_domain_id)
    : undefined;
  const pending = await newestDomainIn(db, service.id, PENDING_STATES);
  return { active: active?.state === 'deployed' ? active : null, pending: pending ?? null };
}

/**
 * Resolves every record through the configured DNS servers. Any record missing or wrong: 422
 * DOMAIN_VERIFICATION_FAILED naming each failing record. All good: the domain is `verified` and the
 * cut-over job is queued. A domain already verified or serving is returned as it is.
 */
export async function verifyCustomDomain(
  deps: Pick<Deps, 'store' | 'provider' | 'dns' | 'config'>,
  actor: Actor,
  service: ServiceRow,
  env: EnvironmentRow,
  domain: CustomDomainRow,
): Promise<CustomDomainRow> {
  assertNotDeleting(service);
  if (RETIRED.includes(domain.state)) {
    throw new ConflictError(
      `The domain ${domain.domain} has been retired (${domain.state}); add it again to use it`,
    );
  }
  if (!VERIFIABLE.includes(domain.state)) return domain;

  const failures: FieldError[] = [];
  for (const record of await recordsOf(deps, env, domain)) {
    try {
      const failure = checkRecord(record, await deps.dns.find(record));
      if (failure) failures.push(failure);
    } catch (error) {
      if (!(error instanceof DnsUnavailableError)) throw error;
      failures.push({ field: record.record_name, error: `${error.message}; try again later` });
    }
  }
  if (failures.length > 0) throw new DomainVerificationError(failures);

  return deps.store.db.transaction().execute(async (trx) => {
    await lockLiveService(trx, service.id);
    if (await transitionCustomDomain(trx, domain.id, VERIFIABLE, 'verified', { failure_reason: '' })) {
      await enqueue(trx, {
        kind: 'deploy_custom_domain',
        subjectId: domain.id,
        accountId: service.account_id,
        queueKey: service.id,
      });
      if (certificatesOn(deps)) {
        // Ordered beside the cut-over, never behind the service's deployments: a CA that is slow or
        // down delays the certificate only.
        await ensureCertificate(trx, {
          customDomainId: domain.id,
          serviceId: service.id,
          name: domain.domain,
        });
        await enqueue(trx, {
          kind: 'issue_certificate',
          subjectId: domain.id,
          accountId: service.account_id,
          queueKey: domain.id,
        });
      }
      await recordAudit(trx, actor, 'custom_domain.verify', {
        id: domain.id,
        environmentId: service.environment_id,
      });
    }
    return (await findCustomDomainById(trx, domain.id)) as CustomDomainRow;
  });
}

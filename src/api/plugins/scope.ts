/**
 * Loads the resources a path names, scoped to the caller's account, before the body is read: the
 * contract's order is token (401), plan (403), resource (404), body (422). An id that is not a UUID
 * cannot exist, so it is a 404 too.
 * @module
 */
import type { FastifyRequest } from 'fastify';
import { NotFoundError } from '../../domain/errors.ts';
import { findDependency, findDependencyBackup } from '../../domain/usecases/dependency-backups.ts';
import { isUuid } from '../../domain/uuid.ts';
import type { Db } from '../../store/database.ts';
import { findCustomDomain } from '../../store/repositories/custom-domains.ts';
import { findDeployment } from '../../store/repositories/deployments.ts';
import { findEnvironment } from '../../store/repositories/environments.ts';
import { findServiceInScope } from '../../store/repositories/scope.ts';
import { findWebhook } from '../../store/repositories/webhooks.ts';
import type {
  CustomDomainRow,
  DependencyBackupRow,
  DeploymentRow,
  EnvironmentRow,
  ServiceResourceRow,
  ServiceRow,
  WebhookRow,
} from '../../store/schema.ts';
import { authOf } from './auth.ts';

export interface Scope {
  environment?: EnvironmentRow;
  service?: ServiceRow;
  latestDeployment?: DeploymentRow | null;
  activeDomain?: CustomDomainRow | null;
  customDomain?: CustomDomainRow;
  deployment?: DeploymentRow;
  webhook?: WebhookRow;
  dependency?: ServiceResourceRow;
  dependencyBackup?: DependencyBackupRow;
}

declare module 'fastify' {
  interface FastifyRequest {
    scope: Scope;
  }
}

export const RESOURCE_OF_PARAM: Record<string, string> = {
  envId: 'Environment',
  serviceId: 'Service',
  deploymentId: 'Deployment',
  customDomainId: 'Custom domain',
  webhookId: 'Webhook',
  deliveryId: 'Webhook delivery',
  backupId: 'Backup',
  tokenId: 'Token',
};

/** The path's parameters as strings, whatever the route's params type says before validation. */
function pathParams(request: FastifyRequest): Record<string, string | undefined> {
  const params: unknown = request.params;
  const strings: Record<string, string | undefined> = {};
  if (typeof params !== 'object' || params === null) return strings;
  // A plain loop: this runs on every /v1 request.
  for (const [k, v] of Object.entries(params)) strings[k] = typeof v === 'string' ? v : undefined;
  return strings;
}

/** An id that is not a UUID names nothing: 404, before anything is read. */
export function checkPathIds(request: FastifyRequest): void {
  const params = request.params as Record<string, unknown> | null;
  // A for-in over the path's few parameters: this runs on every /v1 request.
  for (const param in params) {
    const resource = RESOURCE_OF_PARAM[param];
    const value = params[param];
    if (resource !== undefined && typeof value === 'string' && !isUuid(value)) {
      throw new NotFoundError(resource);
    }
  }
}

export async function loadScope(db: Db, request: FastifyRequest): Promise<Scope> {
  checkPathIds(request);
  const params = pathParams(request);
  const accountId = authOf(request).accountId;
  const scope: Scope = {};
  if (params.envId && params.serviceId) {
    const found = await findServiceInScope(db, accountId, params.envId, params.serviceId);
    if (!found) {
      // Tell a missing environment from a missing service, still without crossing accounts.
      if (!(await findEnvironment(db, accountId, params.envId))) throw new NotFoundError('Environment');
      throw new NotFoundError('Service');
    }
    Object.assign(scope, found);
  } else if (params.envId) {
    scope.environment = await findEnvironment(db, accountId, params.envId);
    if (!scope.environment) throw new NotFoundError('Environment');
  }
  if (params.customDomainId && scope.service) {
    scope.customDomain = await findCustomDomain(db, scope.service.id, params.customDomainId);
    if (!scope.customDomain) throw new NotFoundError('Custom domain');
  }
  if (params.dependencyId !== undefined && scope.service) {
    scope.dependency = await findDependency(db, scope.service, params.dependencyId);
    if (params.backupId) {
      scope.dependencyBackup = await findDependencyBackup(db, scope.dependency, params.backupId);
    }
  }
  if (params.deploymentId) {
    scope.deployment = await findDeployment(db, accountId, params.deploymentId);
    if (!scope.deployment) throw new NotFoundError('Deployment');
  }
  if (params.webhookId) {
    scope.webhook = await findWebhook(db, accountId, params.webhookId);
    if (!scope.webhook) throw new NotFoundError('Webhook');
  }
  return scope;
}

/** A resource the path names: present on every route whose path has its parameter, a bug otherwise. */
function inScope<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the route's path names no ${what}`);
  return value;
}

export const environmentOf = (request: FastifyRequest) => inScope(request.scope.environment, 'environment');
export const serviceOf = (request: FastifyRequest) => inScope(request.scope.service, 'service');
export const deploymentOf = (request: FastifyRequest) => inScope(request.scope.deployment, 'deployment');
export const customDomainOf = (request: FastifyRequest) =>
  inScope(request.scope.customDomain, 'custom domain');
export const webhookOf = (request: FastifyRequest) => inScope(request.scope.webhook, 'webhook');
export const dependencyOf = (request: FastifyRequest) => inScope(request.scope.dependency, 'dependency');
export const dependencyBackupOf = (request: FastifyRequest) =>
  inScope(request.scope.dependencyBackup, 'backup');

/**
 * Roles on every /v1 route (docs/access.md): each route names the role it needs in its definition
 * (`config.role`), and one step, run after authentication, holds every call to it. A route registered
 * without a role fails at registration. Environment scope: a token narrowed to some environments finds no
 * other environment (404, as another account's resources: nothing tells they exist); routes that act on
 * the whole account (`config.wholeAccount`) refuse it (403).
 * @module
 */
import type { FastifyRequest, RouteOptions } from 'fastify';
import { ForbiddenError, NotFoundError } from '../../domain/errors.ts';
import { inScope, ROLES, type Role, roleAtLeast } from '../../domain/roles.ts';
import { isUuid } from '../../domain/uuid.ts';
import type { AuthContext } from './auth.ts';
import type { Scope } from './scope.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The least role a caller needs (docs/access.md). Every /v1 route declares one. */
    role?: Role;
    /** The route acts on the whole account: a token narrowed to some environments may not call it. */
    wholeAccount?: boolean;
  }
}

/** Throws at registration when a /v1 route declares no role, or one that does not exist. */
export function checkDeclaredRole(route: RouteOptions): void {
  const role = route.config?.role;
  if (role === undefined || !ROLES.includes(role)) {
    throw new Error(`${[route.method].flat().join(',')} ${route.url} declares no role (config.role)`);
  }
}

const WRITES_NOTHING = new Set(['GET', 'HEAD']);

/** Role, read-only and whole-account checks, and the path's environment against the caller's scope. */
export function authorize(request: FastifyRequest, auth: AuthContext): void {
  const config = request.routeOptions.config;
  const needed = config.role as Role;
  if (!roleAtLeast(auth.role, needed)) {
    throw new ForbiddenError(`This call needs the ${needed} role; this token acts as ${auth.role}`);
  }
  if (auth.readOnly && !WRITES_NOTHING.has(request.method)) {
    throw new ForbiddenError(`This token is read-only; this call needs the ${needed} role with writes`);
  }
  if (auth.environments === null) return;
  if (config.wholeAccount === true) {
    throw new ForbiddenError(
      'This call acts on the whole account; this token is limited to some environments',
    );
  }
  const envId = (request.params as Record<string, unknown> | null)?.envId;
  if (typeof envId === 'string' && isUuid(envId) && !auth.environments.has(envId)) {
    throw new NotFoundError('Environment');
  }
}

/** After the path's resources are loaded: one outside the caller's environments is not found. */
export function confine(auth: AuthContext, scope: Scope): void {
  if (auth.environments === null) return;
  if (scope.deployment && !inScope(auth.environments, scope.deployment.environment_id)) {
    throw new NotFoundError('Deployment');
  }
}

/**
 * Whether a caller, as it is after an access change, may still read what this request opened (a
 * stream): the route's role, and the environment the path named.
 */
export function stillAllowed(request: FastifyRequest): (auth: AuthContext) => boolean {
  const config = request.routeOptions.config;
  const needed = config.role as Role;
  const scope = request.scope as Scope | undefined;
  const environmentId =
    scope?.environment?.id ?? scope?.service?.environment_id ?? scope?.deployment?.environment_id;
  return (auth) =>
    roleAtLeast(auth.role, needed) &&
    (auth.environments === null ||
      (config.wholeAccount !== true &&
        (environmentId === undefined || auth.environments.has(environmentId))));
}

/**
 * Roles (docs/access.md). Every /v1 route declares the role it needs (`config.role`, api/app.ts enforces
 * it); a caller holds one role in an account, maybe narrowed to some environments and to reads.
 * @module
 */

/** Lowest first: each role may do everything the ones before it may. */
export const ROLES = ['viewer', 'developer', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 };

export function roleAtLeast(held: Role, needed: Role): boolean {
  return RANK[held] >= RANK[needed];
}

/** The lower of two roles: a token never does more than the member who made it. */
export function lowerRole(a: Role, b: Role): Role {
  return RANK[a] <= RANK[b] ? a : b;
}

/** Environments a caller may reach: null is every one of the account's. */
export type EnvironmentScope = ReadonlySet<string> | null;

/** What both a token's and its owner's scope allow. */
export function narrowScope(a: EnvironmentScope, b: EnvironmentScope): EnvironmentScope {
  if (a === null) return b;
  if (b === null) return a;
  return new Set([...a].filter((id) => b.has(id)));
}

export function scopeOf(ids: readonly string[] | null): EnvironmentScope {
  return ids === null ? null : new Set(ids);
}

/**
 * What a token acts with: its own role and environments, never more than its owner's membership holds
 * (the account's own tokens, made by no person, have no member role and keep theirs). Authentication,
 * the token list and revocation all weigh a token by this.
 */
export function tokenActsWith(
  token: { role: Role; environment_ids: readonly string[] | null },
  member: { role: Role | null; environment_ids: readonly string[] | null | undefined },
): { role: Role; environments: EnvironmentScope } {
  return {
    role: member.role ? lowerRole(token.role, member.role) : token.role,
    environments: narrowScope(scopeOf(token.environment_ids), scopeOf(member.environment_ids ?? null)),
  };
}

export function inScope(scope: EnvironmentScope, environmentId: string): boolean {
  return scope === null || scope.has(environmentId);
}

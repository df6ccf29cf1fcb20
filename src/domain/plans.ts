/** Plans and the features they grant. `none` means no active plan: every /v1 call is refused. */
export const PLANS = ['none', 'starter', 'pro'] as const;
export type Plan = (typeof PLANS)[number];

export const FEATURES = ['previews', 'custom_domains'] as const;
export type Feature = (typeof FEATURES)[number];

const PLAN_FEATURES: Record<Plan, readonly Feature[]> = {
  none: [],
  starter: [],
  pro: ['previews', 'custom_domains'],
};

/** A plan's own features plus any granted to the account one by one. */
export function effectiveFeatures(plan: Plan, extra: readonly string[]): Set<string> {
  return new Set<string>([...PLAN_FEATURES[plan], ...extra]);
}

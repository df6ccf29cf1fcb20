import type { Deps } from './context.ts';

/**
 * Whether custom domains get certificates here: ACME configured (BERTH_ACME_*) for a provider whose
 * ingress terminates TLS, or a provider that simulates them (the sim).
 */
export function certificatesOn(deps: Pick<Deps, 'provider' | 'config'>): boolean {
  const kind = deps.provider.certificates;
  return kind === 'simulated' || (kind === 'acme' && deps.config.acme !== undefined);
}

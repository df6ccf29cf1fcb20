import assert from 'node:assert/strict';
import type { DesiredService } from '../../src/providers/provider.ts';
import { type Harness, type Tenant, VALID_SERVICE } from './harness.ts';

/** A docker service with one deployment accepted through the API (queued until a worker runs it). */
export async function acceptedDeployment(
  h: Harness,
  t: Tenant,
): Promise<{ serviceId: string; deploymentId: string }> {
  const created = await h.request('POST', `/v1/environments/${t.envId}/services`, {
    token: t.token,
    body: VALID_SERVICE.docker,
  });
  assert.equal(created.status, 200, created.raw);
  const serviceId = created.body.data.service.id;
  const deployed = await h.request('POST', `/v1/environments/${t.envId}/services/${serviceId}/deploy`, {
    token: t.token,
    body: {},
  });
  assert.equal(deployed.status, 200, deployed.raw);
  return { serviceId, deploymentId: deployed.body.data.deployment_id };
}

/**
 * The variables each deployment hands the harness's provider, by deployment id: what the service would
 * run with (resolved dependency exports, secrets).
 */
export function captureVariables(h: Harness): Map<string, Record<string, string>> {
  const applied = new Map<string, Record<string, string>>();
  const provider = h.deps.provider;
  const apply = provider.apply.bind(provider);
  provider.apply = (desired: DesiredService, signal: AbortSignal) => {
    applied.set(desired.deploymentId, desired.variables);
    return apply(desired, signal);
  };
  return applied;
}

import os from 'node:os';
import type Docker from 'dockerode';
import type { EnvironmentIdentity, EnvironmentRef } from '../provider.ts';
import { LABEL } from './labels.ts';
import type { DockerSettings } from './settings.ts';

/** An environment's network on the Engine (a bridge, or a swarm's overlay), made once and labelled. */
export async function ensureNetwork(
  docker: Docker,
  env: EnvironmentRef,
  name: string,
  options: Pick<Docker.NetworkCreateOptions, 'Driver' | 'Attachable' | 'Options'>,
): Promise<string> {
  const existing = await docker.listNetworks({ filters: { name: [name] } });
  if (!existing.some((n) => n.Name === name)) {
    try {
      await docker.createNetwork({
        Name: name,
        ...options,
        Labels: { [LABEL.managed]: 'true', [LABEL.account]: env.account_id, [LABEL.environment]: env.id },
      });
    } catch (error) {
      // Another worker created it between our look and our create.
      if ((error as { statusCode?: number }).statusCode !== 409) throw error;
    }
  }
  return name;
}

/** Where the public reaches an environment's services: the ingress, on this machine's addresses. */
export function ingressIdentity(settings: DockerSettings): EnvironmentIdentity {
  const addresses = Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a && a.family === 'IPv4' && !a.internal)
    .map((a) => (a as os.NetworkInterfaceInfo).address);
  return {
    ingress_host: settings.ingressHost,
    ingress_url: settings.publicUrl,
    public_nat_ips: addresses,
    svc_role_arn: '',
  };
}

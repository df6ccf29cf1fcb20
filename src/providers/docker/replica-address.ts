import type Docker from 'dockerode';

/**
 * Where a replica answers on its environment's network: its own address, or, when it joined a network
 * sandbox made ahead (docker/sandboxes.ts), the sandbox's.
 * @module
 */

/** The sandbox a replica runs in, if it joined one. */
export function sandboxOf(c: Docker.ContainerInfo): string | undefined {
  const mode = c.HostConfig?.NetworkMode ?? '';
  return mode.startsWith('container:') ? mode.slice('container:'.length) : undefined;
}

/**
 * A replica's address on the environment's network: its own, or its sandbox's. `options` may carry
 * an abortSignal for the sandbox's inspect.
 */
export async function addressOf(
  docker: Docker,
  c: Docker.ContainerInfo,
  network: string,
  options: { abortSignal?: AbortSignal } = {},
): Promise<string | undefined> {
  const sandbox = sandboxOf(c);
  if (!sandbox) return c.NetworkSettings.Networks[network]?.IPAddress || undefined;
  const info = await docker
    .getContainer(sandbox)
    .inspect(options)
    .catch(() => null);
  return info?.NetworkSettings.Networks[network]?.IPAddress || undefined;
}

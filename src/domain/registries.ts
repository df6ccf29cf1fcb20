import type { FieldError } from './errors.ts';

/**
 * The registry allow-list (BERTH_ALLOWED_REGISTRIES): when set, a docker_image service may pull only
 * from the registries it names, so that an operator hosting other teams decides which addresses the
 * engine connects to. Unset, every registry is allowed (a single machine with a local registry).
 */
interface ImageFields {
  source: string;
  docker_registry: string | null;
  docker_image: string | null;
}

/**
 * The registry host (with port) an image is pulled from: `docker_registry`'s host, else the image's
 * first path component when Docker would read it as a host (it holds `.` or `:`, or is `localhost`),
 * else Docker Hub, `docker.io`.
 */
export function registryHostOf(fields: ImageFields): string {
  if (fields.docker_registry) return (fields.docker_registry.split('/')[0] ?? '').toLowerCase();
  const [first = '', ...rest] = (fields.docker_image ?? '').split('/');
  const isHost = rest.length > 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  return isHost ? first.toLowerCase() : 'docker.io';
}

export function registryErrors(fields: ImageFields, allowed: string[]): FieldError[] {
  if (allowed.length === 0 || fields.source !== 'docker_image') return [];
  const host = registryHostOf(fields);
  if (allowed.includes(host)) return [];
  const field = fields.docker_registry ? 'docker_registry' : 'docker_image';
  return [
    {
      field,
      error: `${field} pulls from ${host}, which is not an allowed registry (allowed: ${allowed.join(', ')})`,
    },
  ];
}

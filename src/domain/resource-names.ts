/**
 * What a dependency is called wherever a provider makes it: the prefix made cloud-safe (lowercase
 * letters, digits, hyphens) plus 8 hex characters of what identifies it, so two services (or two
 * environments) declaring the same prefix never share a resource, and a changed id or prefix is a new one.
 * @module
 */
import { createHash } from 'node:crypto';

export function resourceName(
  serviceId: string,
  resource: { kind: string; type: string; id: string; prefix: string },
): string {
  const base =
    resource.prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || resource.kind.replace(/[^a-z0-9]+/g, '');
  const identity = `${serviceId}/${resource.kind}/${resource.type}/${resource.id}/${resource.prefix}`;
  return `${base}-${createHash('sha256').update(identity).digest('hex').slice(0, 8)}`;
}

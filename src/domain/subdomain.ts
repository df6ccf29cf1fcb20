import { randomInt } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

function randomId(length: number): string {
  let id = '';
  for (let i = 0; i < length; i++) id += ALPHABET[randomInt(ALPHABET.length)];
  return id;
}

/**
 * The spec's subdomain: the first four characters of the name, lower-cased, spaces made hyphens, then a
 * hyphen and eight random lower-case alphanumerics. Uniqueness per environment is the caller's retry.
 */
export function generateSubdomain(name: string): string {
  return `${name.slice(0, 4).toLowerCase().replace(/ /g, '-')}-${randomId(8)}`;
}

/** Names of the provider-side secrets of a service, derived once from its subdomain. */
export function kubeSecretNames(subdomain: string) {
  return {
    kube_secret: `${subdomain}-secrets`,
    kube_dep_secret: `${subdomain}-dep-secrets`,
    kube_preview_dep_secret: `${subdomain}-preview-dep-secrets`,
  };
}

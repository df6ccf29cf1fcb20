/**
 * API tokens are UUIDs (v4) shown once; only their SHA-256 is stored.
 * @module
 */
import { hash, randomUUID } from 'node:crypto';
import { isUuid } from './uuid.ts';

export function newApiToken(): string {
  return randomUUID();
}

// Every authenticated request hashes its token: the one-shot hash costs a fraction of a Hash object.
export function hashApiToken(token: string): string {
  return hash('sha256', token.toLowerCase(), 'hex');
}

/** The token from an `Authorization: Bearer <uuid>` header, or null when the header is malformed. */
export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  const token = match?.[1];
  return token && isUuid(token) ? token : null;
}

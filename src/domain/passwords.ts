/**
 * Passwords (docs/access.md): argon2id through @node-rs/argon2 with its defaults (19 MiB, 2 passes, the
 * OWASP baseline), 12 to 256 characters. Signing in as someone unknown, or without a password, verifies
 * against a dummy hash so that it answers in the same time as a wrong password: nothing tells who exists.
 * @module
 */
import { hash, randomBytes } from 'node:crypto';
import { hash as argon2, verify } from '@node-rs/argon2';
import type { FieldError } from './errors.ts';

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

/** The field error a password breaks, if any. */
export function passwordProblem(password: string, email: string): FieldError | null {
  const length = [...password].length;
  if (length < PASSWORD_MIN) {
    return { field: 'password', error: `password must be at least ${PASSWORD_MIN} characters long` };
  }
  if (length > PASSWORD_MAX) {
    return { field: 'password', error: `password must be at most ${PASSWORD_MAX} characters long` };
  }
  if (password.trim().toLowerCase() === email.trim().toLowerCase()) {
    return { field: 'password', error: 'password must not be your email address' };
  }
  return null;
}

export function hashPassword(password: string): Promise<string> {
  return argon2(password);
}

let dummy: Promise<string> | undefined;

/** Whether the password matches; with no stored hash, the same work against a dummy one, and false. */
export async function passwordMatches(stored: string | null | undefined, password: string): Promise<boolean> {
  dummy ??= argon2(randomBytes(16).toString('hex'));
  const against = stored ?? (await dummy);
  const matches = await verify(against, password).catch(() => false);
  return matches && stored != null;
}

/** A secret a browser or a link carries (256 bits, URL-safe); only its SHA-256 is stored. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/**
 * The CSRF token of a session: derived from its cookie's secret, which a page of another site can never
 * read (HttpOnly) and so never derive; the console reads it from the sign-in answer or GET /auth/session.
 */
export function csrfTokenOf(secret: string): string {
  return hash('sha256', `csrf:${secret}`, 'base64url');
}

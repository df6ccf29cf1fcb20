import { OAUTH_ERRORS } from '../../src/api/schemas/device-logins.ts';

/** RFC 8628's endpoints (device login) answer errors as RFC 6749 §5.2 says, not in the spec's shape. */
export const isOAuthRoute = (url: string | undefined): boolean => url?.startsWith('/auth/device/') === true;

/** Why an error body of those endpoints is not `{error, error_description}` as the RFC says, or null. */
export function oauthErrorProblem(status: number, body: unknown): string | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'not a JSON object';
  const { error, error_description, ...rest } = body as Record<string, unknown>;
  if (Object.keys(rest).length > 0) return `extra keys ${Object.keys(rest).join(', ')}`;
  if (!(OAUTH_ERRORS as readonly unknown[]).includes(error)) return `error ${String(error)}`;
  if (
    status !== 400 &&
    !(status === 429 && error === 'slow_down') &&
    !(status === 500 && error === 'server_error')
  )
    return `${String(error)} with status ${status}`;
  if (typeof error_description !== 'string' || !error_description) return 'no error_description';
  if (/^must /.test(error_description)) return 'a validator message without a field';
  return null;
}

/**
 * `berth login` without pasting a token (docs/access.md): the OAuth 2.0 Device Authorization Grant
 * (RFC 8628). The CLI asks the server for a code, shows it with the console's address (and opens that in
 * a browser when a person is at this terminal), and polls until someone signed in approves or denies
 * it there, or it expires.
 * @module
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import packageJson from '../../../package.json' with { type: 'json' };
import { createClient } from '../../client/index.ts';
import { CliError, EXIT } from './errors.ts';

/** How this client names itself to the server; the poll must send the same. */
export const CLIENT_ID = 'berth-cli';
const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** RFC 8628 §3.5: each slow_down adds 5 seconds to the interval, for every later poll. */
const SLOW_DOWN_S = 5;

export interface Granted {
  access_token: string;
  role: string;
  email: string;
}

/** What one poll told: keep waiting, wait longer, or stop (with the token, or refused). */
export type Poll =
  | { granted: Granted }
  | {
      error: 'authorization_pending' | 'slow_down' | 'access_denied' | 'expired_token' | string;
      description?: string;
    };

/**
 * Polls every `interval` seconds (5 more after each slow_down) until the token comes or the login is
 * refused: denied, expired, or anything else the server answers.
 */
export async function pollForToken(
  poll: () => Promise<Poll>,
  intervalS: number,
  wait: (ms: number) => Promise<unknown> = sleep,
): Promise<Granted> {
  let interval = intervalS;
  for (;;) {
    await wait(interval * 1000);
    const result = await poll();
    if ('granted' in result) return result.granted;
    if (result.error === 'authorization_pending') continue;
    if (result.error === 'slow_down') {
      interval += SLOW_DOWN_S;
      continue;
    }
    if (result.error === 'access_denied')
      throw new CliError('the login was denied in the console', EXIT.auth);
    if (result.error === 'expired_token') {
      throw new CliError('the code expired before anyone approved it: run berth login again', EXIT.auth);
    }
    throw new CliError(`the server refused the login: ${result.description ?? result.error}`, EXIT.auth);
  }
}

/** Opens the address in the desktop's browser, if there is one; says nothing when there is none. */
function openBrowser(url: string): void {
  // The platform's own opener: the CLI carries no browser logic of its own.
  const [command, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '""', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(command, args, { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch {
    // No opener: the address is printed anyway.
  }
}

/**
 * The token of a device login on `url`, or undefined when the server has no device login (an older
 * Berth answers 404): the caller then asks for a token instead.
 */
export async function deviceLogin(url: string, options: { browser: boolean }): Promise<Granted | undefined> {
  const api = createClient({ baseUrl: url, token: null, userAgent: `berth-cli/${packageJson.version}` });
  const started = await api.POST('/auth/device/code', {
    body: { client_id: CLIENT_ID, device_name: os.hostname().slice(0, 60) || 'unknown' },
  });
  if (started.response.status === 404) return undefined;
  if (!started.data) {
    const error = started.error as { error_description?: string; message?: string } | undefined;
    throw new CliError(
      `could not start a device login on ${url}: ${error?.error_description ?? error?.message ?? `HTTP ${started.response.status}`}`,
      started.response.status >= 500 ? EXIT.unexpected : EXIT.auth,
    );
  }
  const codes = started.data;
  process.stderr.write(
    `To log in, open ${codes.verification_uri} and enter the code ${codes.user_code}\n` +
      `(or open ${codes.verification_uri_complete}). The code works for ${Math.round(codes.expires_in / 60)} minutes.\n`,
  );
  if (options.browser) openBrowser(codes.verification_uri_complete);
  process.stderr.write('Waiting for the approval in the console…\n');
  return pollForToken(async () => {
    const res = await api.POST('/auth/device/token', {
      body: { grant_type: GRANT, device_code: codes.device_code, client_id: CLIENT_ID },
    });
    if (res.data) return { granted: res.data };
    const error = res.error as { error?: string; error_description?: string } | undefined;
    return { error: error?.error ?? `HTTP ${res.response.status}`, description: error?.error_description };
  }, codes.interval);
}

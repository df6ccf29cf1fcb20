import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import envPaths from 'env-paths';

/** How long completion trusts the names it kept before it asks the server again. */
export const SERVICE_NAMES_TTL_MS = 60_000;

/** Where to find the names: the server, the token and the environment as the user named it (or not). */
export interface NamesKey {
  url: string;
  token: string;
  env: string | undefined;
}

/** One file per server, token and environment; the name hashes them so that no token is written out. */
function fileOf(key: NamesKey): string {
  const digest = createHash('sha256')
    .update(`${key.url}\0${key.token}\0${key.env ?? ''}`)
    .digest('hex')
    .slice(0, 32);
  return path.join(envPaths('berth', { suffix: '' }).cache, `service-names-${digest}.json`);
}

/** The service names kept for completion less than SERVICE_NAMES_TTL_MS ago, else undefined. */
export function recentServiceNames(key: NamesKey, now = Date.now()): string[] | undefined {
  try {
    const kept = JSON.parse(fs.readFileSync(fileOf(key), 'utf8')) as { at: number; names: string[] };
    return now - kept.at < SERVICE_NAMES_TTL_MS && Array.isArray(kept.names) ? kept.names : undefined;
  } catch {
    return undefined;
  }
}

/** Keeps the names a command has just read, for the next TAB; a failure to write only costs that. */
export function keepServiceNames(key: NamesKey, names: string[]): void {
  const file = fileOf(key);
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const temporary = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, JSON.stringify({ at: Date.now(), names }), { mode: 0o600 });
    fs.renameSync(temporary, file);
  } catch {
    // Completion then asks the server.
  }
}

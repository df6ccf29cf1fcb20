import fs from 'node:fs';
import path from 'node:path';
import envPaths from 'env-paths';
import { CliError, EXIT } from './errors.ts';

/** A server and a token to call it with, under a name; `env` is the environment used when --env is not given. */
export interface Context {
  url: string;
  token: string;
  env?: string;
}

export interface ContextFile {
  current?: string;
  contexts: Record<string, Context>;
}

/** The user's config directory (XDG_CONFIG_HOME, else ~/.config on Linux; the platform's own elsewhere). */
export function configFile(): string {
  return path.join(envPaths('berth', { suffix: '' }).config, 'config.json');
}

export function readContexts(file = configFile()): ContextFile {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { contexts: {} };
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as ContextFile;
    return { current: parsed.current, contexts: parsed.contexts ?? {} };
  } catch {
    throw new CliError(
      `${file} is not valid JSON: fix it or remove it and run berth login again`,
      EXIT.usage,
    );
  }
}

/** Written whole to a temporary file, then renamed: readable only by the user (it holds tokens). */
export function writeContexts(contents: ContextFile, file = configFile()): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, `${JSON.stringify(contents, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(temporary, 0o600);
  fs.renameSync(temporary, file);
}

/** A context asked for by name that the file does not hold: a usage error, whichever command asked. */
export function unknownContext(name: string, file: ContextFile): CliError {
  const known = Object.keys(file.contexts);
  return new CliError(
    `no context named "${name}"${known.length ? ` (known: ${known.join(', ')})` : ''}: run berth login --context ${name}`,
    EXIT.usage,
  );
}

export interface Selection {
  /** The context's name, or undefined when BERTH_URL and BERTH_TOKEN alone say where to go. */
  name: string | undefined;
  context: Context;
}

/**
 * The context a command uses: --context, else BERTH_CONTEXT, else the current one; BERTH_URL and
 * BERTH_TOKEN override its server and token (and are enough without any context, or any readable
 * config file).
 */
export function selectContext(wanted: string | undefined, env = process.env): Selection {
  // An empty variable counts as unset.
  const asked = wanted || env.BERTH_CONTEXT || undefined;
  // BERTH_URL and BERTH_TOKEN need no config file, so a broken one does not stop them.
  const alone = asked === undefined && Boolean(env.BERTH_URL && env.BERTH_TOKEN);
  let file: ContextFile = { contexts: {} };
  try {
    file = readContexts();
  } catch (error) {
    if (!alone) throw error;
  }
  const name = asked ?? file.current;
  const stored = name === undefined ? undefined : file.contexts[name];
  if (asked !== undefined && stored === undefined) throw unknownContext(asked, file);
  const url = env.BERTH_URL || stored?.url;
  const token = env.BERTH_TOKEN || stored?.token;
  if (!url || !token) {
    throw new CliError(
      'not logged in: run berth login --url <server> (or set BERTH_URL and BERTH_TOKEN)',
      EXIT.auth,
    );
  }
  return { name: stored ? name : undefined, context: { url, token, env: stored?.env } };
}

/** The environment commands use when --env is not given: BERTH_ENV, else the context's (a name or an id). */
export function environmentReference(option: string | undefined, context: Context, env = process.env) {
  return option || env.BERTH_ENV || context.env || undefined;
}

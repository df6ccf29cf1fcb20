import fs from 'node:fs';
import type { Command } from 'commander';
import dotenv from 'dotenv';
import { ApiError, type BerthClient, type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { unreadableLines } from './dotenv-lines.ts';
import { CliError, EXIT } from './errors.ts';
import type { Column } from './output.ts';
import type { Session } from './session.ts';

type SecretsPath = paths['/v1/environments/{envId}/services/{serviceId}/secrets'];
type Secret = SecretsPath['get']['responses'][200]['content']['application/json']['data']['secrets'][number];
type SecretInput = SecretsPath['put']['requestBody']['content']['application/json']['secrets'][number];

/** Tries of a read-modify-write that keeps meeting another writer's change (412) before it gives up. */
const EDIT_ATTEMPTS = 8;

const SECRET_COLUMNS: Column<Secret>[] = [
  { header: 'KEY', value: (s) => s.key },
  { header: 'SENSITIVE', value: (s) => (s.is_sensitive ? 'yes' : '') },
  { header: 'DESCRIPTION', value: (s) => s.description },
  { header: 'UPDATED', value: (s) => s.updated_at },
];

/**
 * Changes some keys of a service's secrets through the full-replace API without losing anyone else's
 * change: read the secrets with their ETag, write the edited whole with If-Match, and on 412 (someone
 * wrote in between) read again and redo the edit. Sensitive entries go back without a value, which
 * keeps the stored one.
 */
export async function editSecrets(
  api: BerthClient,
  path: { envId: string; serviceId: string },
  edit: (current: Secret[]) => SecretInput[] | Promise<SecretInput[]>,
): Promise<Secret[]> {
  for (let attempt = 1; attempt <= EDIT_ATTEMPTS; attempt++) {
    const read = await api.GET('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path },
    });
    const { secrets } = unwrap(read);
    const etag = read.response.headers.get('etag');
    const body = await edit(secrets);
    const written = await api.PUT('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path },
      headers: etag ? { 'if-match': etag } : {},
      body: { secrets: body },
    });
    if (written.response.status !== 412) {
      try {
        return unwrap(written).secrets;
      } catch (error) {
        throw namedByKey(error, body);
      }
    }
  }
  throw new CliError(
    `the secrets kept changing while this edit was made (${EDIT_ATTEMPTS} tries): run it again`,
    EXIT.conflict,
  );
}

/**
 * The API names a field of the full list it was sent (`secrets[2].key`), which the user never saw:
 * name the key they typed instead (`bad key: ...`), and the field when it is not the key itself.
 */
function namedByKey(error: unknown, sent: SecretInput[]): unknown {
  if (!(error instanceof ApiError) || !error.body.errors) return error;
  const errors = error.body.errors.map((e) => {
    const at = /^secrets\[(\d+)\](?:\.(\w+))?$/.exec(e.field);
    const entry = at ? sent[Number(at[1])] : undefined;
    if (!entry) return e;
    const key = /^[\w.-]+$/.test(entry.key) ? entry.key : JSON.stringify(entry.key);
    const field = at?.[2] ?? 'value';
    return { field: field === 'key' ? key : `${key} (${field})`, error: e.error.replace(e.field, field) };
  });
  return new ApiError(error.status, { ...error.body, errors });
}

/** KEY=VALUE arguments as entries; the value may hold '=' and may be empty. */
function parsePairs(pairs: string[]): Map<string, string> {
  const values = new Map<string, string>();
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new CliError(`"${pair}" is not KEY=VALUE`, EXIT.usage);
    values.set(pair.slice(0, at).trim(), pair.slice(at + 1));
  }
  return values;
}

/**
 * The current entries with `values` set (new keys appended); the keys `sensitive` says become
 * write-only, and a sensitive key stays sensitive.
 */
function withValues(
  current: Secret[],
  values: Map<string, string>,
  sensitive: (key: string) => boolean,
): SecretInput[] {
  const next: SecretInput[] = current.map((s) =>
    values.has(s.key)
      ? { ...s, value: values.get(s.key), is_sensitive: s.is_sensitive || sensitive(s.key) }
      : s,
  );
  const known = new Set(current.map((s) => s.key));
  for (const [key, value] of values) {
    if (!known.has(key)) next.push({ key, value, is_sensitive: sensitive(key) });
  }
  return next;
}

/** The keys of --sensitive, each one of the pairs set. */
function sensitiveKeys(names: string[] | undefined, values: Map<string, string>): Set<string> {
  const keys = new Set(names ?? []);
  for (const key of keys) {
    if (key.includes('=')) {
      throw new CliError(
        `--sensitive takes key names (got "${key}"): put it after the KEY=VALUE pairs`,
        EXIT.usage,
      );
    }
    if (!values.has(key)) {
      throw new CliError(`--sensitive ${key}: no ${key}=VALUE among the pairs to set`, EXIT.usage);
    }
  }
  return keys;
}

/** A value as a .env line reads it back (dotenv): bare when plain, else double-quoted with escapes. */
function dotenvValue(value: string): string {
  return /^[\w.\-/:@%+,]*$/.test(value) ? value : JSON.stringify(value);
}

async function readSecrets(session: Session, path: { envId: string; serviceId: string }) {
  return unwrap(
    await session.api.GET('/v1/environments/{envId}/services/{serviceId}/secrets', { params: { path } }),
  ).secrets;
}

async function target(session: Session, reference: string) {
  const { env, service } = await session.service(reference);
  return { envId: env.id, serviceId: service.id };
}

function summary(session: Session, secrets: Secret[]) {
  session.out.list(secrets, SECRET_COLUMNS, { secrets });
}

export function secretCommands(program: Command): void {
  const secrets = withExamples(
    program
      .command('secrets')
      .description("a service's secrets, one key at a time; sensitive values are never printed"),
    'secrets set "hello web" API_URL=https://api.example.com',
  );
  withExamples(
    common(secrets.command('ls <service>').description('the keys (values are not listed)')),
    'secrets ls "hello web"',
  ).action(
    withSession(async (session, [reference = '']) =>
      summary(session, await readSecrets(session, await target(session, reference))),
    ),
  );
  withExamples(
    common(secrets.command('get <service> <key>').description("one key's value (not for a sensitive key)")),
    'secrets get "hello web" API_URL',
  ).action(
    withSession<[string, string]>(async (session, [reference, key]) => {
      const found = (await readSecrets(session, await target(session, reference))).find((s) => s.key === key);
      if (!found) throw new CliError(`no secret ${key}`, EXIT.notFound);
      if (found.is_sensitive || found.value === undefined) {
        throw new CliError(`${key} is sensitive: its value is write-only`, EXIT.usage);
      }
      if (session.out.format === 'table') process.stdout.write(`${found.value}\n`);
      else session.out.item(found, undefined, found);
    }),
  );
  withExamples(
    common(
      secrets
        .command('set <service> <pairs...>')
        .description('set keys, keeping every other key (a conditional read-modify-write)')
        .option('--sensitive <keys...>', 'make these of the keys set write-only: never shown again'),
    ),
    'secrets set "hello web" API_URL=https://api.example.com LOG_LEVEL=debug',
    'secrets set "hello web" LOG_LEVEL=debug API_KEY=s3cret --sensitive API_KEY',
  ).action(
    withSession<[string, string[]], { sensitive?: string[] }>(
      async (session, [reference, pairs], options) => {
        const values = parsePairs(pairs);
        const sensitive = sensitiveKeys(options.sensitive, values);
        const stored = await editSecrets(session.api, await target(session, reference), (current) =>
          withValues(current, values, (key) => sensitive.has(key)),
        );
        session.out.notice(`set ${[...values.keys()].join(', ')}`);
        summary(session, stored);
      },
    ),
  );
  withExamples(
    common(secrets.command('unset <service> <keys...>').description('remove keys, keeping every other key')),
    'secrets unset "hello web" LOG_LEVEL',
  ).action(
    withSession<[string, string[]]>(async (session, [reference, keys]) => {
      const stored = await editSecrets(session.api, await target(session, reference), (current) => {
        const missing = keys.filter((k) => !current.some((s) => s.key === k));
        if (missing.length > 0)
          throw new CliError(`no secret ${missing.join(', ')}: nothing changed`, EXIT.notFound);
        return current.filter((s) => !keys.includes(s.key));
      });
      session.out.notice(`unset ${keys.join(', ')}`);
      summary(session, stored);
    }),
  );
  withExamples(
    common(
      secrets
        .command('import <service> <file>')
        .description('set every key of a .env file, keeping the other keys')
        .option('--sensitive', 'make the imported keys write-only'),
    ),
    'secrets import "hello web" .env',
    'secrets import "hello web" .env.production --sensitive',
  ).action(
    withSession<[string, string], { sensitive?: boolean }>(async (session, [reference, file], options) => {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch (error) {
        throw new CliError(`cannot read ${file}: ${(error as Error).message}`, EXIT.usage);
      }
      const unreadable = unreadableLines(text);
      if (unreadable.length > 0) {
        const lines = unreadable.map(({ line, before }) =>
          before === undefined ? `line ${line}` : `line ${line} (${JSON.stringify(before)} before its =)`,
        );
        throw new CliError(
          `${file}: ${lines.join(', ')} ${unreadable.length === 1 ? 'is' : 'are'} not KEY=VALUE (a key is letters, digits, _, . and -); nothing was imported`,
          EXIT.usage,
        );
      }
      const values = new Map(Object.entries(dotenv.parse(text)));
      if (values.size === 0) throw new CliError(`${file} holds no KEY=VALUE line`, EXIT.usage);
      const stored = await editSecrets(session.api, await target(session, reference), (current) =>
        withValues(current, values, () => options.sensitive === true),
      );
      session.out.notice(`imported ${values.size} keys from ${file}`);
      summary(session, stored);
    }),
  );
  withExamples(
    common(
      secrets
        .command('export <service>')
        .description('print the secrets as a .env file (sensitive keys only as a comment)'),
    ),
    'secrets export "hello web" > .env',
  ).action(
    withSession(async (session, [reference = '']) => {
      const all = await readSecrets(session, await target(session, reference));
      if (session.out.format !== 'table') return summary(session, all);
      for (const s of all) {
        process.stdout.write(
          s.is_sensitive || s.value === undefined
            ? `# ${s.key} is sensitive: its value is write-only\n`
            : `${s.key}=${dotenvValue(s.value)}\n`,
        );
      }
    }),
  );
}

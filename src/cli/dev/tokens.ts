import { type Command, Option } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { ROLES, type Role } from '../../domain/roles.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import type { Column } from './output.ts';

type Token =
  paths['/v1/tokens']['get']['responses'][200]['content']['application/json']['data']['tokens'][number];

const TOKEN_COLUMNS: Column<Token>[] = [
  { header: 'ID', value: (t) => t.id },
  // The token these commands run with: revoking it logs this context out.
  { header: 'NAME', value: (t) => `${t.name ?? '(operator)'}${t.current ? ' (this one)' : ''}` },
  { header: 'ROLE', value: (t) => (t.read_only ? `${t.role} (read-only)` : t.role) },
  { header: 'OWNER', value: (t) => t.owner?.email ?? '' },
  { header: 'ENVIRONMENTS', value: (t) => t.environment_ids?.join(',') ?? 'all' },
  { header: 'EXPIRES', value: (t) => t.expires_at ?? 'never' },
  { header: 'LAST USED', value: (t) => t.last_used_at ?? 'never' },
  { header: 'REVOKED', value: (t) => t.revoked_at ?? '' },
];

/**
 * --expires as the API takes it (a date-time with its zone): a date alone is that day's start in UTC,
 * as JavaScript reads it. Else the API's refusal would name `expires_at`, a field the user never typed.
 */
function expiry(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (
    !/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}))?$/i.test(value) ||
    Number.isNaN(Date.parse(value))
  ) {
    throw new CliError(
      `--expires takes a date (2027-01-31, midnight UTC) or a time with its zone (2027-01-31T09:00:00Z); got "${value}"`,
      EXIT.usage,
    );
  }
  return new Date(value).toISOString();
}

interface CreateOptions {
  role: Role;
  environment?: string[];
  readOnly?: boolean;
  expires?: string;
}

/** Tokens for scripts and CI (docs/access.md): made with a role no higher than the caller's. */
export function tokenCommands(program: Command): void {
  const tokens = withExamples(
    program.command('tokens').description("the account's API tokens: make, list and revoke them"),
    'tokens ls',
  );
  withExamples(
    common(
      tokens
        .command('create <name>')
        .description('make a token; it is printed once and never again')
        .addOption(
          new Option('--role <role>', 'required: what it may do (at most your own role)')
            .choices(ROLES)
            .makeOptionMandatory(),
        )
        .option('--environment <env...>', 'limit it to these environments (names or ids)')
        .option('--read-only', 'reads only: every write is refused')
        .option(
          '--expires <time>',
          'when it stops working: a date (midnight UTC) or a time with its zone, e.g. 2027-01-31T00:00:00Z',
        ),
      { env: false },
    ),
    'tokens create ci-deploy --role developer --environment staging',
    'tokens create dashboard --role viewer --read-only --expires 2027-01-31T00:00:00Z',
  ).action(
    withSession<[string], CreateOptions>(async (session, [name], o) => {
      const environmentIds = o.environment
        ? await Promise.all(o.environment.map(async (e) => (await session.environment(e)).id))
        : undefined;
      const data = unwrap(
        await session.api.POST('/v1/tokens', {
          body: {
            name,
            role: o.role,
            environment_ids: environmentIds,
            read_only: o.readOnly === true,
            expires_at: expiry(o.expires),
          },
        }),
      );
      session.out.item(data.token, ['id', 'name', 'role', 'token', 'expires_at'], data);
    }),
  );
  withExamples(
    common(tokens.command('ls').description("the account's tokens, newest first (never the tokens)"), {
      env: false,
    }),
    'tokens ls',
    'tokens ls -o json',
  ).action(
    withSession(async (session) => {
      const data = unwrap(await session.api.GET('/v1/tokens'));
      session.out.list(data.tokens, TOKEN_COLUMNS, data);
    }),
  );
  withExamples(
    common(
      tokens.command('revoke <tokenId>').description('revoke a token: refused everywhere within a second'),
      {
        env: false,
      },
    ),
    'tokens revoke <tokenId>',
  ).action(
    withSession(async (session, [id = '']) => {
      const data = unwrap(
        await session.api.DELETE('/v1/tokens/{tokenId}', { params: { path: { tokenId: id } } }),
      );
      session.out.item(data, ['revoked'], data);
    }),
  );
}

import fs from 'node:fs';
import path from 'node:path';
import { type Command, Option } from 'commander';
import { AdminClient, ApiCallError } from '../client/http-client.ts';
import { UnreachableError } from '../client/retry.ts';
import { loadConfig } from '../config.ts';
import { CLOUDS, type Cloud } from '../domain/environment-states.ts';
import { FEATURES, PLANS } from '../domain/plans.ts';
import { ROLES, type Role } from '../domain/roles.ts';
import { CliError, exitCodeOfAnswer, refuseUnsendableToken } from './dev/errors.ts';
import { FORMATS, makeOutput } from './dev/output.ts';
import { withExamples } from './help.ts';

class AdminCliError extends Error {
  readonly isUserError = true;
}

/** The running server's address and the admin token: flags, then BERTH_URL / BERTH_ADMIN_TOKEN, then defaults. */
function client(options: { url?: string; token?: string }): AdminClient {
  const config = loadConfig();
  const url = options.url ?? process.env.BERTH_URL ?? `http://${config.host}:${config.port}`;
  let token = options.token ?? config.adminToken;
  if (!token) {
    const file = path.join(config.dataDir, 'admin-token');
    if (!fs.existsSync(file)) {
      throw new AdminCliError(
        `no admin token: set BERTH_ADMIN_TOKEN or pass --token (none found in ${file})`,
      );
    }
    token = fs.readFileSync(file, 'utf8').trim();
  }
  refuseUnsendableToken(token, 'the admin token (--token, BERTH_ADMIN_TOKEN or BERTH_DATA_DIR/admin-token)');
  return new AdminClient(url, token);
}

/**
 * Prints what the admin API answered: a table (an answer holding one list: its rows; else its fields),
 * or with -o json / yaml the answer as it is.
 */
function print(format: string | undefined, answer: unknown): void {
  const out = makeOutput(format);
  const fields = Object.entries((answer ?? {}) as Record<string, unknown>);
  const [only] = fields;
  if (fields.length === 1 && only && Array.isArray(only[1])) {
    const rows = only[1] as Record<string, unknown>[];
    const headers = [...new Set(rows.flatMap((row) => Object.keys(row)))];
    out.list(
      rows,
      headers.map((header) => ({ header: header.toUpperCase(), value: (row) => row[header] })),
      answer,
    );
    return;
  }
  // One resource under one key (`{account: {...}}`): its fields.
  const resource =
    fields.length === 1 && only && typeof only[1] === 'object' && only[1] !== null ? only[1] : answer;
  out.item(resource as object, undefined, answer);
}

async function run(format: string | undefined, work: () => Promise<unknown>): Promise<void> {
  let answer: unknown;
  try {
    answer = await work();
  } catch (error) {
    if (error instanceof ApiCallError) {
      const details = (error.body.errors ?? []).map((e) => `\n  ${e.field}: ${e.error}`).join('');
      // A 401's message names no cause: say which token was refused and where the server's is.
      const hint =
        error.status === 401
          ? "\n  the admin token was refused: pass --token, or set BERTH_ADMIN_TOKEN to the server's (its BERTH_DATA_DIR/admin-token)"
          : '';
      // Exit codes as the developer commands' (3 auth, 4 not found, 5 validation, 6 conflict, 1 else).
      throw new CliError(
        `${error.body.error_code ?? error.status}: ${error.message}${details}${hint}`,
        exitCodeOfAnswer(error.status, error.body.error_code),
      );
    }
    // No server answering is exit 1, as for the developer commands.
    if (error instanceof UnreachableError) throw error;
    throw new AdminCliError((error as Error).message);
  }
  print(format, answer);
}

interface ConnectionOptions {
  kind: 'github' | 'gitlab';
  baseUrl?: string;
  appId?: string;
  installationId?: string;
  privateKeyFile?: string;
  tokenFile?: string;
  webhookSecretFile?: string;
}

/** A secret from a file (trailing newline dropped) or an environment variable: never an argument, which `ps` shows. */
function secretFrom(file: string | undefined, variable?: string): string | undefined {
  if (file) return fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
  return variable ? process.env[variable] || undefined : undefined;
}

function connectionBody(name: string, o: ConnectionOptions) {
  const webhookSecret = secretFrom(o.webhookSecretFile, 'BERTH_GIT_WEBHOOK_SECRET');
  if (!webhookSecret)
    throw new AdminCliError('no webhook secret: pass --webhook-secret-file or set BERTH_GIT_WEBHOOK_SECRET');
  const app = o.appId !== undefined || o.privateKeyFile !== undefined;
  return {
    kind: o.kind,
    name,
    base_url: o.baseUrl,
    github_app_id: o.appId,
    github_installation_id: o.installationId,
    private_key: o.privateKeyFile ? fs.readFileSync(o.privateKeyFile, 'utf8') : undefined,
    token: app ? undefined : secretFrom(o.tokenFile, 'BERTH_GIT_TOKEN'),
    webhook_secret: webhookSecret,
  };
}

/** `berth admin ...`: talks to the running server's admin API; it never opens the database itself. */
export function adminCommand(program: Command): void {
  const admin = program
    .command('admin')
    .description('operator commands, through the running server (/admin/v1)')
    .option('--url <url>', 'the server (default BERTH_URL, else http://BERTH_HOST:BERTH_PORT)')
    .option('--token <token>', 'the admin token (default BERTH_ADMIN_TOKEN, else BERTH_DATA_DIR/admin-token)')
    .addOption(
      new Option('-o, --output <format>', 'how to print: table (default), json or yaml').choices(FORMATS),
    );
  const opts = () => admin.opts<{ url?: string; token?: string; output?: string }>();
  const planOption = () => new Option('--plan <plan>', 'the plan').choices(PLANS);
  const featureOption = () =>
    new Option('--feature <feature...>', 'features granted beyond the plan').choices(FEATURES);

  const accounts = admin.command('accounts').description('accounts and their plans');
  withExamples(accounts.command('list').description('list every account'), 'admin accounts list').action(() =>
    run(opts().output, () => client(opts()).listAccounts()),
  );
  withExamples(
    accounts
      .command('create <name>')
      .description('create an account (plan starter unless --plan says otherwise)')
      .addOption(planOption())
      .addOption(featureOption()),
    'admin accounts create acme --plan pro',
  ).action((name: string, o: { plan?: 'none'; feature?: 'previews'[] }) =>
    run(opts().output, () => client(opts()).createAccount({ name, plan: o.plan, features: o.feature })),
  );
  withExamples(
    accounts
      .command('update <accountId>')
      .description("change an account's plan or features (--plan none suspends it)")
      .addOption(planOption())
      .addOption(featureOption()),
    'admin accounts update <accountId> --plan starter --feature previews',
  ).action((id: string, o: { plan?: 'none'; feature?: 'previews'[] }) =>
    run(opts().output, () => client(opts()).updateAccount(id, { plan: o.plan, features: o.feature })),
  );

  const tokens = admin.command('tokens').description('API tokens');
  withExamples(
    tokens
      .command('list <accountId>')
      .description("list an account's tokens: ids and dates, never the tokens"),
    'admin tokens list <accountId>',
  ).action((id: string) => run(opts().output, () => client(opts()).listTokens(id)));
  withExamples(
    tokens.command('issue <accountId>').description('issue an API token; it is printed once and never again'),
    'admin tokens issue <accountId>',
    'admin tokens issue $(berth admin accounts list -o json | jq -r \'.accounts[] | select(.name == "default") | .id\')',
  ).action((id: string) => run(opts().output, () => client(opts()).issueToken(id)));
  withExamples(
    tokens.command('revoke <tokenId>').description('revoke an API token at once'),
    'admin tokens revoke <tokenId>',
  ).action((id: string) => run(opts().output, () => client(opts()).revokeToken(id)));

  const users = admin.command('users').description('people, and their roles in accounts (docs/access.md)');
  withExamples(users.command('list').description('list every user'), 'admin users list').action(() =>
    run(opts().output, () => client(opts()).listUsers()),
  );
  withExamples(
    users.command('create <email> <displayName>').description('create a user'),
    "admin users create ada@example.com 'Ada Lovelace'",
  ).action((email: string, displayName: string) =>
    run(opts().output, () => client(opts()).createUser({ email, display_name: displayName })),
  );
  withExamples(
    users.command('members <accountId>').description("list an account's members and their roles"),
    'admin users members <accountId>',
  ).action((id: string) => run(opts().output, () => client(opts()).listMembers(id)));
  withExamples(
    users
      .command('add <accountId> <userId>')
      .description("make a user a member of an account, or change the member's role")
      .addOption(new Option('--role <role>', 'required: the role').choices(ROLES).makeOptionMandatory())
      .option('--environment <envId...>', 'limit the member to these environments'),
    'admin users add <accountId> <userId> --role developer',
    'admin users add <accountId> <userId> --role viewer --environment <envId>',
  ).action((id: string, userId: string, o: { role: Role; environment?: string[] }) =>
    run(opts().output, () =>
      client(opts()).setMember(id, userId, { role: o.role, environment_ids: o.environment ?? null }),
    ),
  );
  withExamples(
    users
      .command('remove <accountId> <userId>')
      .description("end a membership: the member's tokens stop working at once"),
    'admin users remove <accountId> <userId>',
  ).action((id: string, userId: string) => run(opts().output, () => client(opts()).removeMember(id, userId)));
  withExamples(
    users
      .command('token <accountId> <userId>')
      .description("issue a token of a member, with the member's role; printed once and never again"),
    'admin users token <accountId> <userId>',
  ).action((id: string, userId: string) =>
    run(opts().output, () => client(opts()).issueMemberToken(id, userId)),
  );

  const environments = admin.command('environments').description('environments');
  withExamples(
    environments
      .command('list <accountId>')
      .description("list an account's environments (deleted ones left out)"),
    'admin environments list <accountId>',
  ).action((id: string) => run(opts().output, () => client(opts()).listEnvironments(id)));
  withExamples(
    environments
      .command('create <accountId> <name>')
      .description('create an environment; it is available once provisioned')
      .addOption(new Option('--cloud <cloud>', 'the cloud (default aws)').choices(CLOUDS))
      .option('--region <region>', 'e.g. us-east-1 (default us-east-1, us-central1 on gcp)'),
    'admin environments create <accountId> staging --cloud gcp --region europe-west1',
  ).action((id: string, name: string, o: { cloud?: Cloud; region?: string }) =>
    run(opts().output, () =>
      client(opts()).createEnvironment(id, { name, cloud: o.cloud, region: o.region }),
    ),
  );
  withExamples(
    admin
      .command('dependency-password <arn>')
      .description("read back a dependency's password by its $passwordArn (in the account's audit log)"),
    "admin dependency-password 'arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!db-1a2b3c4d-5e6f'",
  ).action((arn: string) => run(opts().output, () => client(opts()).dependencyPassword(arn)));
  withExamples(
    admin
      .command('rotate-master-key')
      .description(
        'while the server serves, re-seal every sealed value under the new master key (docs/operations.md); run it again to resume',
      ),
    'admin rotate-master-key',
  ).action(() => run(opts().output, () => client(opts()).rotateMasterKey()));
  withExamples(
    admin
      .command('backup [file]')
      .description(
        "write a consistent snapshot of Berth's own state (a file, or into a directory; default: the current one) with its manifest and checksum; the master key is not in it",
      ),
    'admin backup',
    'admin backup /var/backups/berth/',
  ).action((file: string | undefined) =>
    run(opts().output, async () => (await import('./backups.ts')).downloadBackup(client(opts()), file)),
  );
  withExamples(
    admin
      .command('restore <file>')
      .description(
        'restore a backup onto the empty database of BERTH_DATABASE_URL or BERTH_DATA_DIR, with the master key it was taken with (BERTH_MASTER_KEY); start berth serve afterwards',
      ),
    'admin restore berth-backup-2026-01-31T03-00-00-000Z.ndjson.gz',
    'BERTH_DATA_DIR=/srv/berth-new BERTH_MASTER_KEY=$(cat /secure/berth.key) admin restore nightly.ndjson.gz',
  ).action((file: string) =>
    run(opts().output, async () => (await import('./backups.ts')).restoreFromFile(file)),
  );
  const connections = admin
    .command('connections')
    .description('git connections: how an account clones private repositories and signs webhooks');
  withExamples(
    connections
      .command('list <accountId>')
      .description("list an account's git connections (never their secrets)"),
    'admin connections list <accountId>',
  ).action((id: string) => run(opts().output, () => client(opts()).listGitConnections(id)));
  withExamples(
    connections
      .command('create <accountId> <name>')
      .description(
        'connect an account to GitHub (an App, or a token) or GitLab (a token); secrets are read from files or the environment, never from the command line',
      )
      .addOption(new Option('--kind <kind>', 'the host kind').choices(['github', 'gitlab']).default('github'))
      .option(
        '--base-url <url>',
        'GitHub Enterprise or a self-hosted GitLab (default github.com / gitlab.com)',
      )
      .option('--app-id <id>', 'GitHub App id')
      .option('--installation-id <id>', "the App's installation id")
      .option('--private-key-file <path>', "the App's private key (PEM file)")
      .option('--token-file <path>', 'a file holding the access token (default: BERTH_GIT_TOKEN)')
      .option(
        '--webhook-secret-file <path>',
        'a file holding the webhook secret (default: BERTH_GIT_WEBHOOK_SECRET)',
      ),
    'admin connections create <accountId> acme-github --app-id 123456 --installation-id 7890123 --private-key-file app.pem --webhook-secret-file hook.secret',
    'BERTH_GIT_TOKEN=glpat-... BERTH_GIT_WEBHOOK_SECRET=... admin connections create <accountId> acme-gitlab --kind gitlab',
  ).action((id: string, name: string, o: ConnectionOptions) =>
    run(opts().output, () => client(opts()).createGitConnection(id, connectionBody(name, o))),
  );
  withExamples(
    connections
      .command('rotate <connectionId>')
      .description("replace a connection's token, App private key or webhook secret (read from files)")
      .option('--token-file <path>', 'a file holding the new token')
      .option('--private-key-file <path>', "the App's new private key (PEM file)")
      .option('--webhook-secret-file <path>', 'a file holding the new webhook secret'),
    'admin connections rotate <connectionId> --token-file new.token',
  ).action((id: string, o: Pick<ConnectionOptions, 'tokenFile' | 'privateKeyFile' | 'webhookSecretFile'>) =>
    run(opts().output, () =>
      client(opts()).changeGitConnection(id, {
        token: secretFrom(o.tokenFile),
        private_key: o.privateKeyFile ? fs.readFileSync(o.privateKeyFile, 'utf8') : undefined,
        webhook_secret: secretFrom(o.webhookSecretFile),
      }),
    ),
  );
  withExamples(
    connections.command('delete <connectionId>').description('delete a git connection no service uses'),
    'admin connections delete <connectionId>',
  ).action((id: string) => run(opts().output, () => client(opts()).deleteGitConnection(id)));

  withExamples(admin, 'admin accounts list', 'admin --url http://127.0.0.1:8080 tokens issue <accountId>');
  withExamples(accounts, 'admin accounts list');
  withExamples(tokens, 'admin tokens list <accountId>');
  withExamples(users, 'admin users list');
  withExamples(environments, 'admin environments list <accountId>');
  withExamples(connections, 'admin connections list <accountId>');
}

import fs from 'node:fs';
import path from 'node:path';
import { Command, Option } from 'commander';
import { AdminClient, ApiCallError } from '../client/http-client.ts';
import { loadConfig } from '../config.ts';
import { CLOUDS, type Cloud } from '../domain/environment-states.ts';

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
  return new AdminClient(url, token);
}

async function run(work: () => Promise<unknown>): Promise<void> {
  try {
    process.stdout.write(`${JSON.stringify(await work(), null, 2)}\n`);
  } catch (error) {
    if (error instanceof ApiCallError) {
      const details = (error.body.errors ?? []).map((e) => `\n  ${e.field}: ${e.error}`).join('');
      throw new AdminCliError(`${error.body.error_code ?? error.status}: ${error.message}${details}`);
    }
    throw new AdminCliError((error as Error).message);
  }
}

/** `berth admin ...`: talks to the running server's admin API; it never opens the database itself. */
export function adminCommand(plans: readonly string[], features: readonly string[]): Command {
  const admin = new Command('admin')
    .description('operator commands, through the running server (/admin/v1)')
    .option('--url <url>', 'the server (default BERTH_URL, else http://BERTH_HOST:BERTH_PORT)')
    .option(
      '--token <token>',
      'the admin token (default BERTH_ADMIN_TOKEN, else BERTH_DATA_DIR/admin-token)',
    );
  const opts = () => admin.opts<{ url?: string; token?: string }>();
  const planOption = () => new Option('--plan <plan>', 'the plan').choices(plans);
  const featureOption = () =>
    new Option('--feature <feature...>', 'features granted beyond the plan').choices(features);

  const accounts = admin.command('accounts').description('accounts and their plans');
  accounts.command('list').action(() => run(() => client(opts()).listAccounts()));
  accounts
    .command('create <name>')
    .addOption(planOption())
    .addOption(featureOption())
    .action((name: string, o: { plan?: 'none'; feature?: 'previews'[] }) =>
      run(() => client(opts()).createAccount({ name, plan: o.plan, features: o.feature })),
    );
  accounts
    .command('update <accountId>')
    .addOption(planOption())
    .addOption(featureOption())
    .action((id: string, o: { plan?: 'none'; feature?: 'previews'[] }) =>
      run(() => client(opts()).updateAccount(id, { plan: o.plan, features: o.feature })),
    );

  const tokens = admin.command('tokens').description('API tokens');
  tokens
    .command('issue <accountId>')
    .description('issue an API token; it is printed once and never again')
    .action((id: string) => run(() => client(opts()).issueToken(id)));
  tokens.command('revoke <tokenId>').action((id: string) => run(() => client(opts()).revokeToken(id)));

  const environments = admin.command('environments').description('environments');
  environments
    .command('create <accountId> <name>')
    .addOption(new Option('--cloud <cloud>').choices(CLOUDS))
    .option('--region <region>', 'e.g. us-east-1')
    .action((id: string, name: string, o: { cloud?: Cloud; region?: string }) =>
      run(() => client(opts()).createEnvironment(id, { name, cloud: o.cloud, region: o.region })),
    );
  return admin;
}

import packageJson from '../../../package.json' with { type: 'json' };
import { type BerthClient, createClient, unwrap } from '../../client/index.ts';
import { isUuid } from '../../domain/uuid.ts';
import { keepServiceNames } from '../completion/service-names.ts';
import { type Context, environmentReference, selectContext } from './contexts.ts';
import { CliError, EXIT, refuseUnsendableToken } from './errors.ts';
import { makeOutput, type Output } from './output.ts';

/** The options every developer command takes (common.ts adds them). */
export interface CommonOptions {
  context?: string;
  env?: string;
  output?: string;
}

export function clientFor(context: Pick<Context, 'url' | 'token'>): BerthClient {
  refuseUnsendableToken(context.token, 'the API token (--token, BERTH_TOKEN or the login context)');
  return createClient({
    baseUrl: context.url,
    token: context.token,
    userAgent: `berth-cli/${packageJson.version}`,
  });
}

export type Environment = Awaited<ReturnType<Session['environments']>>[number];
export type Service = Awaited<ReturnType<Session['services']>>[number];

/** What a command works with: the API client, the chosen context, and where to print. */
export class Session {
  readonly api: BerthClient;
  readonly context: Context;
  readonly contextName: string | undefined;
  readonly out: Output;
  /** --env, else BERTH_ENV, else the context's: undefined means the account's only environment. */
  private readonly envReference: string | undefined;
  /** The id of the environment `envReference` named, once read. */
  private defaultEnvId: string | undefined;

  constructor(options: CommonOptions) {
    this.out = makeOutput(options.output);
    const selected = selectContext(options.context);
    this.context = selected.context;
    this.contextName = selected.name;
    this.api = clientFor(this.context);
    this.envReference = environmentReference(options.env, this.context);
  }

  async environments() {
    return unwrap(await this.api.GET('/v1/environments')).environments;
  }

  /** The environment named (by name or id), else the one the options and the context name. */
  async environment(named?: string): Promise<Environment> {
    const chosen = await this.find(named ?? this.envReference);
    if (named === undefined) this.defaultEnvId = chosen.id;
    return chosen;
  }

  private async find(reference: string | undefined): Promise<Environment> {
    const all = await this.environments();
    if (reference === undefined) {
      if (all.length === 1 && all[0]) return all[0];
      throw new CliError(
        `choose an environment with --env (one of: ${all.map((e) => e.name).join(', ') || 'none'})`,
        EXIT.usage,
      );
    }
    const found = all.filter((e) => e.id === reference || e.name === reference);
    if (found.length === 1 && found[0]) return found[0];
    if (found.length > 1)
      throw new CliError(`several environments are named "${reference}": use its id`, EXIT.usage);
    throw new CliError(
      `no environment "${reference}" (known: ${all.map((e) => e.name).join(', ')})`,
      EXIT.notFound,
    );
  }

  /** Every service of the environment, all pages. */
  async services(envId: string) {
    const services = [];
    let cursor: string | undefined;
    do {
      const page = unwrap(
        await this.api.GET('/v1/environments/{envId}/services', {
          params: { path: { envId }, query: { limit: 100, cursor } },
        }),
      );
      services.push(...page.services);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    // The next TAB completes these names without asking the server.
    if (envId === this.defaultEnvId) {
      const { url, token } = this.context;
      keepServiceNames(
        { url, token, env: this.envReference },
        services.map((s) => s.name),
      );
    }
    return services;
  }

  /** A service by id, or by its exact name within the environment. */
  async service(reference: string): Promise<{ env: Environment; service: Service }> {
    const env = await this.environment();
    if (isUuid(reference)) {
      const { service } = unwrap(
        await this.api.GET('/v1/environments/{envId}/services/{serviceId}', {
          params: { path: { envId: env.id, serviceId: reference } },
        }),
      );
      return { env, service };
    }
    const found = (await this.services(env.id)).filter((s) => s.name === reference);
    if (found.length === 1 && found[0]) return { env, service: found[0] };
    if (found.length > 1)
      throw new CliError(`several services are named "${reference}": use its id`, EXIT.usage);
    throw new CliError(`no service named "${reference}" in environment ${env.name}`, EXIT.notFound);
  }
}

import fs from 'node:fs';
import type { Command } from 'commander';
import { ApiError, type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { cliErrorOf } from './api-errors.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { type Column, stateText } from './output.ts';
import type { Environment, Service, Session } from './session.ts';
import { yaml } from './yaml.ts';

type CreateBody =
  paths['/v1/environments/{envId}/services']['post']['requestBody']['content']['application/json'];
type PatchBody =
  paths['/v1/environments/{envId}/services/{serviceId}']['patch']['requestBody']['content']['application/json'];

const ENV_COLUMNS: Column<Environment>[] = [
  { header: 'NAME', value: (e) => e.name },
  { header: 'ID', value: (e) => e.id },
  { header: 'CLOUD', value: (e) => `${e.cloud} ${e.region}` },
  { header: 'STATE', value: (e) => stateText(e.state) },
];

const SERVICE_COLUMNS: Column<Service>[] = [
  { header: 'NAME', value: (s) => s.name },
  { header: 'ID', value: (s) => s.id },
  { header: 'TYPE', value: (s) => s.type },
  { header: 'SOURCE', value: (s) => s.source },
  { header: 'STATE', value: (s) => stateText(s.state) },
  { header: 'ORIGIN', value: (s) => s.origin },
];

const SERVICE_FIELDS = [
  'name',
  'id',
  'type',
  'source',
  'state',
  'run_status',
  'ready_count',
  'replica_count',
  'port',
  'docker_image',
  'git_repo_full_name',
  'git_repo_branch',
  'helm_chart_name',
  'cron_schedule',
  'origin',
  'subdomain',
  'is_protected',
  'created_at',
  'updated_at',
];

/** Service fields settable with flags: flag, body field, how to read the value. */
const SERVICE_FLAGS: [string, string, keyof CreateBody, (v: string) => unknown][] = [
  ['--name <name>', 'name (3 to 50 letters and spaces)', 'name', String],
  ['--type <type>', 'web, internal, worker, cron or job', 'type', String],
  ['--source <source>', 'github, gitlab, docker_image or helm_chart', 'source', String],
  ['--port <port>', 'the port a web or internal service listens on', 'port', Number],
  ['--replicas <n>', 'replica_count', 'replica_count', Number],
  ['--cpu <n>', 'cpu_count_min', 'cpu_count_min', Number],
  ['--memory <mb>', 'memory_mb_min, in megabytes', 'memory_mb_min', Number],
  ['--image <image>', 'docker_image: the image to run', 'docker_image', String],
  ['--registry <registry>', 'docker_image: the registry to pull from', 'docker_registry', String],
  ['--repo <org/repo>', 'git sources: the repository', 'git_repo_full_name', String],
  ['--branch <branch>', 'git sources: the branch', 'git_repo_branch', String],
  ['--chart-repo <url>', 'helm_chart: the chart repository', 'helm_chart_repo', String],
  ['--chart-name <name>', 'helm_chart: the chart', 'helm_chart_name', String],
  ['--cron <schedule>', 'cron: the schedule', 'cron_schedule', String],
  ['--run-command <command>', 'the command to run', 'run_command', String],
];

function withServiceFlags(command: Command): Command {
  command.option('-f, --file <file>', 'the fields as a JSON or YAML file (flags override it)');
  for (const [flags, description] of SERVICE_FLAGS) command.option(flags, description);
  return command;
}

/** Reads a JSON or YAML object from a file (YAML is a superset of JSON). */
export function readObjectFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`, EXIT.usage);
  }
  let value: unknown;
  try {
    value = yaml().parse(text);
  } catch (error) {
    // The parser's message goes on with a picture of the line; its first line says what and where.
    const [what] = (error as Error).message.split('\n');
    throw new CliError(`${file} is neither JSON nor YAML: ${what?.replace(/:$/, '')}`, EXIT.usage);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CliError(`${file} must hold one object of service fields`, EXIT.usage);
  }
  return value as Record<string, unknown>;
}

function serviceBody(options: Record<string, unknown>): Record<string, unknown> {
  const body = typeof options.file === 'string' ? readObjectFile(options.file) : {};
  // The API takes ops_json as the document's text; in a YAML file it reads best as a mapping.
  const ops = body.ops_json;
  if (typeof ops === 'object' && ops !== null && !Array.isArray(ops)) body.ops_json = JSON.stringify(ops);
  for (const [flags, , field, read] of SERVICE_FLAGS) {
    const key = flags.slice(2, flags.indexOf(' ')).replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
    const value = options[key];
    if (typeof value === 'string') {
      const parsed = read(value);
      if (typeof parsed === 'number' && Number.isNaN(parsed)) {
        throw new CliError(`${flags.split(' ')[0]} takes a number (got "${value}")`, EXIT.usage);
      }
      body[field] = parsed;
    }
  }
  return body;
}

async function showService(session: Session, envId: string, serviceId: string) {
  const data = unwrap(
    await session.api.GET('/v1/environments/{envId}/services/{serviceId}', {
      params: { path: { envId, serviceId } },
    }),
  );
  session.out.item(data.service, SERVICE_FIELDS, data);
}

export function resourceCommands(program: Command): void {
  const envs = withExamples(program.command('envs').description('environments of your account'), 'envs ls');
  withExamples(
    common(envs.command('ls').description('list the environments'), { env: false }),
    'envs ls',
  ).action(
    withSession(async (session) => {
      const environments = await session.environments();
      session.out.list(environments, ENV_COLUMNS, { environments });
    }),
  );
  withExamples(
    common(envs.command('get [env]').description('an environment with its live network identity'), {
      env: false,
    }),
    'envs get default',
    'envs get default -o json',
  ).action(
    withSession<[string | undefined]>(async (session, [reference]) => {
      const env = await session.environment(reference);
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}', { params: { path: { envId: env.id } } }),
      );
      const { environment, ...identity } = data;
      session.out.item({ ...environment, ...identity }, undefined, data);
    }),
  );

  const services = withExamples(
    program.command('services').description('services of an environment (by name or id)'),
    'services ls',
  );
  withExamples(
    common(services.command('ls').description('list the services')),
    'services ls --env staging',
  ).action(
    withSession(async (session) => {
      const env = await session.environment();
      const list = await session.services(env.id);
      session.out.list(list, SERVICE_COLUMNS, { services: list });
    }),
  );
  withExamples(
    common(services.command('get <service>').description('a service, hydrated')),
    'services get "hello web"',
    'services get "hello web" -o yaml',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      await showService(session, env.id, service.id);
    }),
  );
  withExamples(
    withServiceFlags(
      common(
        services
          .command('create')
          .description('create a service from flags or from a JSON/YAML file of Create Service fields')
          .option('--deploy-now', 'deploy it at once'),
      ),
    ),
    'services create -f service.yaml',
    'services create --name "hello web" --source docker_image --image acme/hello --type web --port 8080 --replicas 1 --cpu 0.5 --memory 256',
  ).action(
    withSession<[], Record<string, unknown>>(async (session, _args, options) => {
      const env = await session.environment();
      const body = serviceBody(options);
      if (options.deployNow) body.deploy_now = true;
      // The API lets two services share a name, and then no command can name either: refuse here.
      const same = (await session.services(env.id)).find((s) => s.name === body.name);
      if (same) {
        throw new CliError(
          `environment ${env.name} already has a service named "${same.name}" (${same.id}): change it with berth services patch "${same.name}", or choose another name`,
          EXIT.conflict,
        );
      }
      const answer = await session.api.POST('/v1/environments/{envId}/services', {
        params: { path: { envId: env.id } },
        body: body as CreateBody,
      });
      // A deploy_now that failed still created the service: the answer's header alone names it.
      const createdId = answer.response.headers.get('x-berth-service-id');
      if (!answer.response.ok && createdId) {
        const failed = cliErrorOf(new ApiError(answer.response.status, answer.error)) as CliError;
        throw new CliError(
          `${failed.message}\n  the service was created (${body.name}, ${createdId}), but its first deployment was not: deploy it with berth deploy ${createdId} --env ${env.name}`,
          failed.exitCode,
        );
      }
      const { service } = unwrap(answer);
      session.out.notice(`created service ${service.name} (${service.id})`);
      session.out.item(service, SERVICE_FIELDS, { service });
    }),
  );
  withExamples(
    withServiceFlags(
      common(services.command('patch <service>').description('change some fields of a service')),
    ),
    'services patch "hello web" --replicas 3',
    'services patch "hello web" -f changes.yaml',
  ).action(
    withSession<[string], Record<string, unknown>>(async (session, [reference], options) => {
      const { env, service } = await session.service(reference);
      const body = serviceBody(options);
      if (Object.keys(body).length === 0)
        throw new CliError('nothing to change: give flags or -f <file>', EXIT.usage);
      const data = unwrap(
        await session.api.PATCH('/v1/environments/{envId}/services/{serviceId}', {
          params: { path: { envId: env.id, serviceId: service.id } },
          body: body as PatchBody,
        }),
      );
      session.out.item(data.service, SERVICE_FIELDS, data);
    }),
  );
  withExamples(
    common(services.command('delete <service>').description('delete a service (asynchronous)')),
    'services delete "hello web"',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      unwrap(
        await session.api.DELETE('/v1/environments/{envId}/services/{serviceId}', {
          params: { path: { envId: env.id, serviceId: service.id } },
        }),
      );
      session.out.notice(`deleting service ${service.name} (${service.id})`);
      session.out.item({ id: service.id, name: service.name, accepted: true });
    }),
  );
}

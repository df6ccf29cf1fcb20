import type { Command } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { type Column, stateText } from './output.ts';

type Dependency =
  paths['/v1/environments/{envId}/services/{serviceId}/dependencies']['get']['responses'][200]['content']['application/json']['data']['dependencies'][number];

const DEPENDENCY_COLUMNS: Column<Dependency>[] = [
  { header: 'KIND', value: (d) => `${d.kind}.${d.type}` },
  { header: 'ID', value: (d) => d.id },
  { header: 'STATE', value: (d) => stateText(d.state) },
  { header: 'NAME', value: (d) => d.attributes.name ?? '' },
  { header: 'ENDPOINT', value: (d) => d.attributes.endpoint ?? '' },
  { header: 'PROVISIONED', value: (d) => d.provisioned_at ?? '' },
  { header: 'ERROR', value: (d) => d.error },
];

/** What the service's ops.json dependencies were made into (never a password: the API returns none). */
export function dependencyCommands(program: Command): void {
  const dependencies = withExamples(
    program.command('dependencies').description("what a service's ops.json dependencies were made into"),
    'dependencies ls "hello web"',
  );
  withExamples(
    common(
      dependencies
        .command('ls <service>')
        .description('each resource: kind, id, state, name, endpoint, when it was made'),
    ),
    'dependencies ls "hello web"',
    'dependencies ls "hello web" -o json',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}/services/{serviceId}/dependencies', {
          params: { path: { envId: env.id, serviceId: service.id } },
        }),
      );
      session.out.list(data.dependencies, DEPENDENCY_COLUMNS, data);
    }),
  );
}

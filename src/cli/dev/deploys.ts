/**
 * The commands that make and follow deployments: deploy, rollback, restart, and the deployments of a
 * service (list, get, wait, cancel). `--wait` follows the deployment's log stream to its end.
 * @module
 */
import { styleText } from 'node:util';
import type { Command } from 'commander';
import { type Deployment, followDeployment, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { type Column, stateText } from './output.ts';
import type { Session } from './session.ts';

const DEPLOYMENT_COLUMNS: Column<Deployment>[] = [
  { header: 'ID', value: (d) => d.id },
  { header: 'STATE', value: (d) => stateText(d.state) },
  { header: 'TARGET', value: (d) => d.git_commit_ref || d.docker_image_tag || d.helm_chart_version },
  { header: 'NOTE', value: (d) => d.note },
  { header: 'CREATED', value: (d) => d.created_at },
  { header: 'REASON', value: (d) => d.failure_reason },
];

function elapsed(since: number): string {
  const s = Math.round((Date.now() - since) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

/** What `deploy --wait` shows of the deployment at its end, in this order, when set. */
const DEPLOYMENT_SUMMARY: (keyof Deployment)[] = [
  'id',
  'state',
  'git_commit_ref',
  'docker_image_tag',
  'helm_chart_version',
  'docker_image_digest',
  'note',
  'failure_reason',
  'created_at',
  'updated_at',
];

/**
 * Follows the deployment's log to its end, printing each line as it is written; then its outcome (from
 * the stream's `end` event) as a line and a short summary; exits 7 when it failed. With -o json or yaml
 * it prints `{deployment}`, what GET /v1/deployments/{id} answers.
 */
async function waitAndReport(session: Session, deploymentId: string) {
  const started = Date.now();
  const log = followDeployment(session.api, deploymentId);
  let next = await log.next();
  while (!next.done) {
    session.out.notice(`  ${styleText('dim', next.value.step)}: ${next.value.line}`);
    next = await log.next();
  }
  const deployment = next.value;
  session.out.notice(`${stateText(deployment.state)} (${elapsed(started)})`);
  const shown = DEPLOYMENT_SUMMARY.filter((field) => deployment[field] !== '' && deployment[field] !== null);
  session.out.item(deployment, shown, { deployment });
  if (deployment.state === 'failed') {
    throw new CliError(
      `deployment ${deployment.id} failed${deployment.failure_reason ? `: ${deployment.failure_reason}` : ''}`,
      EXIT.deploymentFailed,
    );
  }
}

/**
 * A deployment the API accepted (`what`: deploying, rolling back ... the service): said on stderr, then
 * followed to its end with --wait (waitAndReport), else its id printed.
 */
async function accepted(
  session: Session,
  what: string,
  data: { deployment_id: string },
  wait: boolean | undefined,
): Promise<void> {
  session.out.notice(`${what}: deployment ${data.deployment_id}`);
  if (wait) await waitAndReport(session, data.deployment_id);
  else session.out.item(data, undefined, data);
}

export function deployCommands(program: Command): void {
  withExamples(
    common(
      program
        .command('deploy <service>')
        .description('deploy a service; with --wait, follow it and exit 7 if it fails')
        .option('--commit <sha>', 'git sources: the commit (default the branch head)')
        .option('--tag <tag>', 'docker_image: the image tag (default latest)')
        .option('--chart-version <version>', 'helm_chart: the chart version')
        .option('--note <text>', 'a note kept with the deployment')
        .option('--wait', 'follow its log until it succeeds or fails, then show how it ended'),
    ),
    'deploy "hello web" --tag v2 --note "release 2" --wait',
    'deploy "hello web" --commit 4f2a9c1',
  ).action(
    withSession<
      [string],
      {
        commit?: string;
        tag?: string;
        chartVersion?: string;
        note?: string;
        wait?: boolean;
      }
    >(async (session, [reference], options) => {
      const { env, service } = await session.service(reference);
      const data = unwrap(
        await session.api.POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
          params: { path: { envId: env.id, serviceId: service.id } },
          body: {
            commit_id: options.commit,
            docker_image_tag: options.tag,
            helm_chart_version: options.chartVersion,
            note: options.note,
          },
        }),
      );
      if (!('deployment_id' in data))
        throw new CliError('the API answered a preview deploy', EXIT.unexpected);
      await accepted(session, `deploying ${service.name}`, data, options.wait);
    }),
  );

  const deployments = withExamples(
    program.command('deployments').description('deployments of a service'),
    'deployments ls "hello web"',
  );
  withExamples(
    common(deployments.command('ls <service>').description("a service's deployments, newest first")),
    'deployments ls "hello web"',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      const data = unwrap(
        await session.api.GET('/v1/environments/{envId}/services/{serviceId}/deployments', {
          params: { path: { envId: env.id, serviceId: service.id } },
        }),
      );
      session.out.list(data.deployments, DEPLOYMENT_COLUMNS, data);
    }),
  );
  withExamples(
    common(deployments.command('get <deploymentId>').description('a deployment'), { env: false }),
    'deployments get <deploymentId> -o json',
  ).action(
    withSession(async (session, [deploymentId = '']) => {
      const data = unwrap(
        await session.api.GET('/v1/deployments/{deploymentId}', { params: { path: { deploymentId } } }),
      );
      session.out.item(data.deployment, undefined, data);
    }),
  );
  withExamples(
    common(
      deployments
        .command('wait <deploymentId>')
        .description('follow a deployment until it succeeds or fails (exit 7 if it fails)'),
      { env: false },
    ),
    'deployments wait <deploymentId>',
  ).action(
    withSession<[string]>(async (session, [deploymentId]) => {
      await waitAndReport(session, deploymentId);
    }),
  );
  withExamples(
    common(
      deployments
        .command('cancel <deploymentId>')
        .description(
          'cancel a deployment: a queued one never runs; one in progress stops before traffic moves',
        ),
      { env: false },
    ),
    'deployments cancel <deploymentId>',
  ).action(
    withSession(async (session, [deploymentId = '']) => {
      const data = unwrap(
        await session.api.POST('/v1/deployments/{deploymentId}/cancel', {
          params: { path: { deploymentId } },
          body: {},
        }),
      );
      session.out.notice(`cancelled deployment ${deploymentId}`);
      session.out.item(data.deployment, DEPLOYMENT_SUMMARY, data);
    }),
  );

  withExamples(
    common(
      program
        .command('rollback <service>')
        .description(
          'deploy an earlier successful deployment again, with its target, ops.json and secrets as they were; with --wait, follow it',
        )
        .option(
          '--to <deploymentId>',
          'the successful deployment to go back to (default the one before the serving one)',
        )
        .option('--note <text>', 'a note kept with the deployment')
        .option('--wait', 'follow its log until it succeeds or fails, then show how it ended'),
    ),
    'rollback "hello web" --wait',
    'rollback "hello web" --to <deploymentId> --note "back to 1.4"',
  ).action(
    withSession<[string], { to?: string; note?: string; wait?: boolean }>(
      async (session, [reference], options) => {
        const { env, service } = await session.service(reference);
        const data = unwrap(
          await session.api.POST('/v1/environments/{envId}/services/{serviceId}/rollback', {
            params: { path: { envId: env.id, serviceId: service.id } },
            body: { deployment_id: options.to, note: options.note },
          }),
        );
        await accepted(session, `rolling back ${service.name}`, data, options.wait);
      },
    ),
  );

  withExamples(
    common(
      program
        .command('restart <service>')
        .description(
          'replace the replicas with the serving version, new ones healthy before the old ones go; with --wait, follow it',
        )
        .option('--note <text>', 'a note kept with the deployment')
        .option('--wait', 'follow its log until it succeeds or fails, then show how it ended'),
    ),
    'restart "hello web" --wait',
  ).action(
    withSession<[string], { note?: string; wait?: boolean }>(async (session, [reference], options) => {
      const { env, service } = await session.service(reference);
      const data = unwrap(
        await session.api.POST('/v1/environments/{envId}/services/{serviceId}/restart', {
          params: { path: { envId: env.id, serviceId: service.id } },
          body: { note: options.note },
        }),
      );
      await accepted(session, `restarting ${service.name}`, data, options.wait);
    }),
  );
}

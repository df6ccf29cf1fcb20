import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import { type OpsConfig, parseOpsJson } from '../../domain/ops-json.ts';
import { TerminalError } from '../../jobs/errors.ts';
import type { DeployedSource, DeployLog, DesiredService } from '../provider.ts';
import { checkout, inside } from './git-source.ts';
import { buildImage, digestOf } from './images.ts';
import { LABEL } from './labels.ts';

/**
 * A git deployment's image, built on the Engine the driver talks to (the docker driver's, a swarm
 * manager's): the repository cloned at the deployment's commit (or its branch head), its ops.json read
 * from the checkout (a repository's file wins over none), the image built from `build_context` and
 * `dockerfile_path` and tagged `tag`.
 */
export async function buildFromGit(
  docker: Docker,
  gitBaseUrl: string,
  desired: DesiredService,
  tag: string,
  log: DeployLog,
): Promise<{ image: string; ops: OpsConfig; source: DeployedSource }> {
  const { service, target, deploymentId } = desired;
  log.line(
    'source',
    `Cloning ${service.git_repo_full_name} at ${target.commit_id || `the head of ${service.git_repo_branch}`}`,
  );
  const source = await checkout({
    baseUrl: gitBaseUrl,
    repo: service.git_repo_full_name ?? '',
    branch: service.git_repo_branch ?? 'main',
    commit: target.commit_id,
    access: desired.git,
  });
  log.end('source', 'success', `Commit ${source.commit} by ${source.author}: ${source.message}`);
  try {
    let ops = desired.ops;
    if (service.ops_json_path) {
      const text = await readFile(inside(source.dir, service.ops_json_path, 'ops_json_path'), 'utf8').catch(
        () => null,
      );
      if (text === null) throw new TerminalError(`no ops.json at ${service.ops_json_path}`);
      const parsed = parseOpsJson(text, service.ops_json_path, service.type);
      if (parsed.errors.length > 0) throw new TerminalError(parsed.errors.map((e) => e.error).join('; '));
      ops = parsed.config;
    }
    await buildImage(
      docker,
      {
        repoDir: source.dir,
        buildContext: service.build_context,
        dockerfilePath: service.dockerfile_path,
        tag,
        labels: { [LABEL.managed]: 'true', [LABEL.service]: service.id, [LABEL.deployment]: deploymentId },
      },
      (text) => log.line('build', text),
    ).catch((error: Error) => {
      log.end('build', 'failed', error.message);
      throw error;
    });
    log.end('build', 'success', `Built ${tag}`);
    return {
      image: tag,
      ops,
      source: {
        git_commit_ref: source.commit,
        git_commit_author: source.author,
        git_commit_message: source.message,
        docker_image_digest: await digestOf(docker, tag),
      },
    };
  } finally {
    source.remove();
  }
}

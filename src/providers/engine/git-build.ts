import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import type { OpsConfig } from '../../domain/ops-json.ts';
import type { DeployedSource, DeployLog, DesiredService, Sources } from '../provider.ts';
import { checkout, inside } from './git-source.ts';
import { buildImage, digestOf } from './images.ts';
import { LABEL } from './labels.ts';

/**
 * A file of a git service's repository at the commit `target` names (or its branch head): the
 * deployment's ops.json, read before its dependencies are made. The path may not lead out of the
 * checkout, through symbolic links either.
 */
export async function readFromGit(
  gitBaseUrl: string,
  request: Parameters<Sources['readFile']>[0],
): Promise<{ commit: string; text: string | null }> {
  const { service, target, git, path } = request;
  const source = await checkout({
    baseUrl: gitBaseUrl,
    repo: service.git_repo_full_name ?? '',
    branch: service.git_repo_branch ?? 'main',
    commit: target.commit_id,
    access: git,
  });
  try {
    const text = await readFile(inside(source.dir, path, 'ops_json_path'), 'utf8').catch(() => null);
    return { commit: source.commit, text };
  } finally {
    source.remove();
  }
}

/**
 * A git deployment's image, built on the Engine the driver talks to (the docker driver's, a swarm
 * manager's): the repository cloned at the deployment's commit (or its branch head; the jobs layer
 * pins the commit when it read the ops.json there), the image built from `build_context` and
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
      ops: desired.ops,
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

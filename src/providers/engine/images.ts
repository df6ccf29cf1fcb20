import fs from 'node:fs';
import path from 'node:path';
import type Docker from 'dockerode';
import { TerminalError } from '../../jobs/errors.ts';
import { type DesiredService, failure } from '../provider.ts';
import { contextFiles, inside } from './git-source.ts';

interface Progress {
  stream?: string;
  status?: string;
  id?: string;
  progressDetail?: { current?: number };
  error?: string;
  errorDetail?: { message?: string };
}

/** What a person reads of a progress line: build output, or a pull's status without the byte counters. */
function readable(event: Progress): string | null {
  if (event.stream !== undefined) return event.stream;
  if (event.status === undefined || event.progressDetail?.current !== undefined) return null;
  return event.id ? `${event.id}: ${event.status}` : event.status;
}

/** Docker streams progress as JSON lines; a failure is a line with `error`. */
async function finish(
  docker: Docker,
  stream: NodeJS.ReadableStream,
  what: string,
  onOutput: (text: string) => void,
): Promise<void> {
  const output = await new Promise<Progress[]>((resolve, reject) =>
    docker.modem.followProgress(
      stream,
      (error, result) => (error ? reject(error) : resolve(result)),
      (event: Progress) => {
        const text = readable(event);
        if (text) onOutput(text);
      },
    ),
  );
  const failed = output.find((line) => line.error || line.errorDetail);
  if (failed) {
    throw new TerminalError(`${what}: ${failed.errorDetail?.message ?? failed.error}`);
  }
}

/** `registry/image:tag`, the reference a docker_image service runs. */
export function imageReference(registry: string | null, image: string, tag: string): string {
  return `${registry ? `${registry.replace(/\/$/, '')}/` : ''}${image}:${tag || 'latest'}`;
}

/** The reference a docker_image deployment runs: its service's image at the deploy's tag. */
export function imageOf({ service, target }: Pick<DesiredService, 'service' | 'target'>): string {
  return imageReference(service.docker_registry, service.docker_image ?? '', target.docker_image_tag);
}

/**
 * An Engine API failure as a provider error. 4xx: the request itself is wrong (no such image, tag or
 * repository, access denied, a Dockerfile the Engine refuses): asking again cannot help. Anything else
 * (a registry or the Engine down or overloaded) may pass, so it is retried.
 */
export function engineError(error: unknown, what: string): Error {
  const status = (error as { statusCode?: number }).statusCode;
  const detail = ((error as Error).message ?? String(error)).trim();
  return failure(`${what}: ${detail}`, {
    retryable: !(status !== undefined && status >= 400 && status < 500),
  });
}

/**
 * Pulls an image, within `timeoutMs` (BERTH_PULL_TIMEOUT_MS): a registry that accepts the connection
 * and never answers would otherwise hold the deployment until its own timeout with no reason. Past the
 * deadline the pull is abandoned (its stream closed, which cancels it in the engine) and the deployment
 * fails at once with that reason: retrying a silent registry would hold the service's queue for long.
 */
export async function pullImage(
  docker: Docker,
  reference: string,
  timeoutMs: number,
  onOutput: (text: string) => void = () => undefined,
): Promise<void> {
  let stream: NodeJS.ReadableStream | undefined;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      (stream as { destroy?: () => void } | undefined)?.destroy?.();
      reject(
        new TerminalError(
          `could not pull ${reference}: the registry did not finish within ${timeoutMs / 1000} s`,
        ),
      );
    }, timeoutMs);
  });
  const pull = async () => {
    try {
      stream = await docker.pull(reference);
    } catch (error) {
      throw engineError(error, `could not pull ${reference}`);
    }
    await finish(docker, stream, `could not pull ${reference}`, onOutput);
  };
  try {
    await Promise.race([pull(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export interface BuildRequest {
  repoDir: string;
  buildContext: string | null;
  dockerfilePath: string | null;
  tag: string;
  labels: Record<string, string>;
}

/**
 * Builds the image of a git deployment. The build context is `build_context` (default the repository
 * root). The Dockerfile is `dockerfile_path` read from the repository root, or else from the context
 * (default `Dockerfile` in the context); it must lie inside the context, since that is all Docker gets.
 */
export async function buildImage(
  docker: Docker,
  request: BuildRequest,
  onOutput: (text: string) => void = () => undefined,
): Promise<void> {
  const context = inside(request.repoDir, request.buildContext || '.', 'build_context');
  const wanted = request.dockerfilePath || 'Dockerfile';
  const fromRoot = inside(request.repoDir, wanted, 'dockerfile_path');
  const dockerfile =
    request.dockerfilePath && fs.existsSync(fromRoot) ? fromRoot : inside(context, wanted, 'dockerfile_path');
  if (!fs.existsSync(dockerfile)) {
    throw new TerminalError(`no Dockerfile at ${path.relative(request.repoDir, dockerfile)}`);
  }
  const relative = path.relative(context, dockerfile);
  if (relative.startsWith('..')) {
    throw new TerminalError(`the Dockerfile ${wanted} must be inside the build context`);
  }
  const stream = await docker
    .buildImage(
      { context, src: contextFiles(context) },
      { t: request.tag, dockerfile: relative, labels: request.labels, rm: true, forcerm: true },
    )
    .catch((error: unknown) => {
      throw engineError(error, 'the image build failed');
    });
  await finish(docker, stream, 'the image build failed', onOutput);
}

/** An image's registry digest when it came from a registry (a tag can move; this cannot), else its id. */
export async function digestOf(docker: Docker, image: string): Promise<string> {
  const info = await docker.getImage(image).inspect();
  const pulled = info.RepoDigests?.find((d) => image.startsWith(`${d.split('@')[0]}:`));
  return pulled?.split('@')[1] ?? info.Id;
}

/** Pushes a built image to its registry (anonymously: the Engine wants the header all the same). */
export async function pushImage(
  docker: Docker,
  reference: string,
  onOutput: (text: string) => void,
): Promise<void> {
  const stream = await docker
    .getImage(reference)
    .push({ authconfig: {} })
    .catch((error: unknown) => {
      throw engineError(error, `could not push ${reference}`);
    });
  await finish(docker, stream, `could not push ${reference}`, onOutput);
}

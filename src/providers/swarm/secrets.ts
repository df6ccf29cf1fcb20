/**
 * How a task gets its variables without them ever reaching a node's disk in plain text. The container
 * config (and so `docker inspect`, the task in Raft and the node's containers/ directory) holds none of
 * them: they are one swarm secret per deployment (encrypted in the managers' Raft log, sent to a node only
 * for the tasks it runs and mounted there on tmpfs at /run/secrets/berth-env), a shell script of
 * `export NAME='value'` lines. The task's command becomes a shell that sources it and then execs what
 * the task runs: its run_command, or else the image's own ENTRYPOINT and CMD (read from the image, pulled
 * on the manager for that). So an image with variables needs a /bin/sh; one without is refused up front
 * with that reason. A deployment without variables runs its image untouched. Swarm secrets are immutable,
 * so each deployment has its own (`berth-env-<deployment>`), and `sweepSecrets` removes those no swarm
 * service of the Berth service refers to any more.
 * @module
 */
import type Docker from 'dockerode';
import { isVariableName } from '../../domain/variable-names.ts';
import { TerminalError } from '../../jobs/errors.ts';
import { engineError, pullImage } from '../engine/images.ts';
import { LABEL, labelFilter } from '../engine/labels.ts';
import type { DeployLog, DesiredService } from '../provider.ts';

const FILE = 'berth-env';
const ENV_PATH = `/run/secrets/${FILE}`;
/** Sources the variables, then becomes the task's own command (its arguments), keeping its PID. */
const LOADER = ['/bin/sh', '-c', `. ${ENV_PATH} && exec "$@"`, FILE];

/** How a task starts and what it is told: the parts of its ContainerSpec that carry variables. */
export interface Launch {
  Command?: string[];
  Args?: string[];
  /** Only what is no secret: the port Berth assigns. */
  Env: string[];
  Secrets?: Docker.SecretReference[];
  /** Put before a shell health check, so that the check sees the variables as the process does. */
  healthPrelude: string;
}

export function secretName(deploymentId: string): string {
  return `berth-env-${deploymentId}`;
}

/** One `export NAME='value'` line per variable: inside single quotes only `'` itself needs escaping. */
export function envScript(variables: Record<string, string>): string {
  return Object.entries(variables)
    .map(([name, value]) => {
      // The API and ops.json admit only such names; one that is not would run as shell code.
      if (!isVariableName(name)) throw new TerminalError(`"${name}" is not an environment variable name`);
      return `export ${name}='${value.replaceAll("'", `'\\''`)}'\n`;
    })
    .join('');
}

/** `registry/name:tag@digest` as `registry/name@digest`: the form the Engine pulls and inspects by. */
function pinned(image: string): string {
  const at = image.indexOf('@');
  if (at < 0) return image;
  return `${image.slice(0, at).replace(/:[^/:]*$/, '')}${image.slice(at)}`;
}

/**
 * The image's ENTRYPOINT and CMD, which the loader execs: read on the manager (a pull there when the
 * manager lacks the image). Refuses an image with no command, or with no /bin/sh to run the loader
 * (looked up in a container created from the image and never started).
 */
async function imageCommand(
  docker: Docker,
  desired: DesiredService,
  image: string,
  pullTimeoutMs: number,
  log: DeployLog,
): Promise<string[]> {
  const reference = pinned(image);
  const inspect = () => docker.getImage(reference).inspect();
  const info = await inspect().catch(async () => {
    log.line('pull', `Pulling ${reference} on the manager to read its ENTRYPOINT and CMD`);
    await pullImage(docker, reference, pullTimeoutMs);
    return inspect();
  });
  const asList = (value: string | string[] | undefined | null) =>
    value === undefined || value === null ? [] : Array.isArray(value) ? value : [value];
  const command = [...asList(info.Config.Entrypoint), ...asList(info.Config.Cmd)];
  if (command.length === 0) {
    throw new TerminalError(
      `the image ${image} has neither ENTRYPOINT nor CMD, and the service has no run_command: nothing to run`,
    );
  }
  // Named after the deployment: a rerun after a crash removes the one the crash left.
  const name = `berth-probe-${desired.deploymentId}`;
  await docker
    .getContainer(name)
    .remove({ force: true })
    .catch((error: { statusCode?: number }) => {
      if (error.statusCode !== 404) throw engineError(error, `could not look into ${image}`);
    });
  const probe = await docker
    .createContainer({ name, Image: reference, Entrypoint: ['/bin/sh'], Labels: { [LABEL.managed]: 'true' } })
    .catch((error: unknown) => {
      throw engineError(error, `could not look into ${image}`);
    });
  const hasShell = await probe
    .infoArchive({ path: '/bin/sh' })
    .then(
      () => true,
      (error: { statusCode?: number }) => {
        if (error.statusCode === 404) return false;
        throw engineError(error, `could not look into ${image}`);
      },
    )
    .finally(() => probe.remove({ force: true }));
  if (!hasShell) {
    throw new TerminalError(
      `the image ${image} has no /bin/sh: on the swarm provider a service's variables reach its process through ` +
        'a swarm secret that a shell in the image reads (so that they never lie in plain text on a node), ' +
        'and this image has no shell to do it. Build the image with a /bin/sh (busybox or a distribution base), ' +
        'or deploy the service without variables',
    );
  }
  return command;
}

/** Makes the deployment's secret; a rerun after a crash finds it made and uses it. */
async function ensureSecret(docker: Docker, desired: DesiredService, data: string): Promise<string> {
  const name = secretName(desired.deploymentId);
  const created = await docker
    .createSecret({
      Name: name,
      Labels: {
        [LABEL.managed]: 'true',
        [LABEL.service]: desired.service.id,
        [LABEL.deployment]: desired.deploymentId,
        [LABEL.generation]: String(desired.generation),
      },
      Data: Buffer.from(data).toString('base64'),
    })
    .catch((error: { statusCode?: number }) => {
      if (error.statusCode === 409) return null;
      throw engineError(error, 'the swarm refused the secret holding the variables');
    });
  if (created) return (created as { id?: string; ID?: string }).id ?? (created as { ID: string }).ID;
  return (await docker.getSecret(name).inspect()).ID;
}

/**
 * What a deployment's tasks start with: `PORT` in the environment, every other variable in the
 * deployment's swarm secret (made here) and the loader in front of the command.
 */
export async function launchOf(
  docker: Docker,
  desired: DesiredService,
  image: string,
  pullTimeoutMs: number,
  log: DeployLog,
): Promise<Launch> {
  const { service } = desired;
  const port: Record<string, string> = service.port ? { PORT: String(service.port) } : {};
  // The assigned port wins over a variable of that name, as on the docker provider.
  const secret = Object.fromEntries(Object.entries(desired.variables).filter(([name]) => !(name in port)));
  const run = service.run_command ? ['/bin/sh', '-c', service.run_command] : undefined;
  const Env = Object.entries(port).map(([k, v]) => `${k}=${v}`);
  if (Object.keys(secret).length === 0) return { Command: run, Env, healthPrelude: '' };
  const script = envScript(secret);
  const Args = run ?? (await imageCommand(docker, desired, image, pullTimeoutMs, log));
  const SecretID = await ensureSecret(docker, desired, script);
  return {
    Command: LOADER,
    Args,
    Env,
    Secrets: [
      {
        SecretID,
        SecretName: secretName(desired.deploymentId),
        // Readable by whatever user the image runs as (the secret is the container's own anyway).
        File: { Name: FILE, UID: '0', GID: '0', Mode: 0o444 },
      },
    ],
    healthPrelude: `. ${ENV_PATH}; `,
  };
}

/** The secrets a swarm service's current and previous spec refer to (a rollback needs the previous one). */
function referenced(service: Docker.Service): string[] {
  return [service.Spec, service.PreviousSpec].flatMap((spec) => {
    const template = spec?.TaskTemplate as Docker.ContainerTaskSpec | undefined;
    return template?.ContainerSpec?.Secrets?.map((s) => s.SecretID ?? '') ?? [];
  });
}

/**
 * Removes the Berth service's secrets of generations below `below` that no swarm service of it refers
 * to. A newer generation's secret is never touched: its rollout may have made it and not yet put it in
 * a spec. The swarm refuses to remove a secret a service uses; that one stays for a later sweep.
 */
export async function sweepSecrets(docker: Docker, serviceId: string, below: number): Promise<void> {
  const owned = labelFilter({ [LABEL.managed]: 'true', [LABEL.service]: serviceId });
  const secrets = await docker.listSecrets({ filters: owned });
  if (secrets.length === 0) return;
  const services = await docker.listServices({ filters: owned });
  const inUse = new Set(services.flatMap(referenced));
  for (const secret of secrets) {
    if (inUse.has(secret.ID)) continue;
    if (Number(secret.Spec?.Labels?.[LABEL.generation] ?? 0) >= below) continue;
    await docker
      .getSecret(secret.ID)
      .remove()
      .catch((error: { statusCode?: number }) => {
        // Gone already (another sweep), or taken into use since the listing.
        if (error.statusCode === 404 || error.statusCode === 400) return;
        throw error;
      });
  }
}

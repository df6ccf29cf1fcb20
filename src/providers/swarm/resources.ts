/**
 * ops.json dependencies on the swarm. Each is a swarm service of one replica, `berth-dep-<name>`, from
 * its engine's image (engine/dependency-engines.ts: the Engine drivers' engines, variables and
 * attributes) resolved to a digest, on the environment's overlay with the alias `<name>`, and its data
 * in the named volume `berth-dep-<name>`. A named volume lives on one node, so the service is pinned to
 * the node chosen at its first provision (the one with the fewest dependencies; swarm_dependencies
 * records it): a task the swarm restarts finds its data there. Its password is a swarm secret of the
 * same name, which the task reads from a file (`<VARIABLE>_FILE`). The swarm's API reaches no node's
 * volumes, so deleting a dependency wipes its volume with a last task on its node. docs/swarm-provider.md
 * says what happens when that node is lost.
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type Docker from 'dockerode';
import { instanceMemoryBytes } from '../../domain/instance-memory.ts';
import type { OpsResource } from '../../domain/ops-json.ts';
import { TerminalError } from '../../jobs/errors.ts';
import {
  dependencyNameOf,
  type Engine,
  environmentWithPasswordFile,
  imageSettingOf,
  READY_TIMEOUT_MS,
} from '../engine/dependency-engines.ts';
import { engineError } from '../engine/images.ts';
import { LABEL } from '../engine/labels.ts';
import { lastOutput } from '../engine/output.ts';
import { type Dependency, EngineResources } from '../engine/resources.ts';
import type { EnvironmentRef, ProvisionedResource, ResourceRequest } from '../provider.ts';
import { failedTasks, running, type Task, taskErrors, tasksOf } from './services.ts';
import type { SwarmSettings } from './settings.ts';
import type { SwarmDb } from './tables.ts';

/** The Engine counts time in nanoseconds. */
const SECOND = 1e9;
const POLL_MS = 1000;
/** Failed tasks of a first start before the dependency is given up (the swarm would restart it forever). */
const FAILED_STARTS = 3;
/** How long a dependency's first start may take before its health check counts (a slow, busy node). */
const FIRST_START_MS = 600_000;
/** How long the task that wipes a deleted dependency's volume has to run on its node. */
const WIPE_TIMEOUT_MS = 120_000;
/** Where the wiping task mounts the volume. */
const WIPE_MOUNT = '/berth-wipe';
const WIPE_COMMAND = ['/bin/sh', '-c', `rm -rf ${WIPE_MOUNT}/* ${WIPE_MOUNT}/.[!.]* ${WIPE_MOUNT}/..?*`];

interface Pin {
  name: string;
  node_id: string;
  image: string;
}

interface Node {
  ID: string;
  Spec?: { Availability?: string };
  Status?: { State?: string };
}

const isGone = (error: unknown) => (error as { statusCode?: number }).statusCode === 404;
const ignoreGone = (error: unknown) => {
  if (!isGone(error)) throw error;
};

/**
 * The engine's own readiness signal, as the docker driver waits for it (its port accepts connections),
 * checked inside the task by the engine: the swarm calls a task running only once it passes. bash's
 * /dev/tcp where the image has bash (the default images, the official postgres and mariadb), else nc.
 */
function readinessCheck(engine: Engine): Docker.HealthConfig {
  const port = engine.port;
  return {
    Test: [
      'CMD-SHELL',
      `bash -c ': </dev/tcp/127.0.0.1/${port}' 2>/dev/null || nc -w 5 127.0.0.1 ${port} </dev/null`,
    ],
    Interval: 2 * SECOND,
    Timeout: 10 * SECOND,
    Retries: 5,
    // A first start initialises the data before it listens: failures meanwhile do not count, and the
    // period is long, since a task killed as unhealthy in the middle would start its data over.
    StartPeriod: FIRST_START_MS * 1e6,
  };
}

/**
 * The memory cap of the declared `instance_type`'s class on the hosted cloud (domain/instance-memory.ts);
 * none for a class not known or none declared (a swarm service's cap can be lifted again).
 */
function limitsOf(resource: OpsResource): { MemoryBytes?: number } {
  const bytes = instanceMemoryBytes(resource.kind, resource.properties.instance_type);
  return bytes === null ? {} : { MemoryBytes: bytes };
}

const isWipe = (template: { ContainerSpec?: { Command?: string[] } } | undefined) =>
  JSON.stringify(template?.ContainerSpec?.Command) === JSON.stringify(WIPE_COMMAND);
const wipeTasks = (tasks: Task[]) =>
  tasks.filter((t) => isWipe(t.Spec as { ContainerSpec?: { Command?: string[] } }));

export class SwarmResources extends EngineResources<SwarmSettings> {
  private readonly db: SwarmDb;

  constructor(
    docker: Docker,
    db: SwarmDb,
    settings: SwarmSettings,
    ensureNetwork: (env: EnvironmentRef) => Promise<string>,
  ) {
    super(docker, settings, ensureNetwork);
    this.db = db;
  }

  protected readonly driver = 'swarm';

  /**
   * A copy of a dependency under `name`, to restore a backup into for inspection: made anew and empty
   * (whatever an earlier copy held goes, its volume wiped), with the dependency's password, and running.
   * It is pinned as any dependency is; deleting the dependency deletes it.
   */
  async makeCopy(request: ResourceRequest, name: string, signal: AbortSignal): Promise<ProvisionedResource> {
    signal.throwIfAborted();
    await this.removeAll(name);
    return this.ensureNamed(request, name, signal);
  }

  protected async provision(
    request: ResourceRequest,
    dependency: Dependency,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const { environment, resource, password } = request;
    const { engine, name, runName: serviceName, labels } = dependency;
    const made = await this.inspect(serviceName);
    // Another engine under the same name (the declared engine changed) is a different database.
    if (made && made.Spec?.Labels?.[LABEL.engine] !== engine.name) {
      signal.throwIfAborted();
      await this.removeAll(name);
    }
    const { pin, node } = await this.pinOf(serviceName, engine, resource);
    if (node.Status?.State !== 'ready') {
      throw new TerminalError(
        `${serviceName} runs on node ${pin.node_id}, where its data is, and that node is ` +
          `${node.Status?.State ?? 'unknown'}: bring it back, or remove it from the swarm (docker node rm) to ` +
          'make the dependency anew, empty, on another node',
      );
    }
    const limits = limitsOf(resource);
    const current = await this.inspect(serviceName);
    signal.throwIfAborted();
    if (!current) {
      const network = await this.ensureNetwork(environment);
      const secret = engine.passwordVariable ? await this.ensureSecret(serviceName, labels, password) : null;
      await this.docker
        .createService(this.specOf(name, engine, labels, pin, network, secret, limits))
        .catch((error: unknown) => {
          // Made meanwhile by another worker running the same job: theirs is the one.
          if ((error as { statusCode?: number }).statusCode !== 409)
            throw engineError(error, `the swarm refused ${serviceName}`);
        });
    } else if (current.Spec?.TaskTemplate?.Resources?.Limits?.MemoryBytes !== limits.MemoryBytes) {
      // A changed instance_type: the same service (node, volume, secret) with the new cap; its task
      // restarts in place.
      const spec = current.Spec as Docker.ServiceSpec;
      await this.docker
        .getService(current.ID)
        .update({
          ...spec,
          TaskTemplate: { ...(spec.TaskTemplate as Docker.ContainerTaskSpec), Resources: { Limits: limits } },
          version: current.Version?.Index,
        })
        .catch((error: unknown) => {
          throw engineError(error, `the swarm refused to update ${serviceName}`);
        });
    }
    await this.waitRunning(serviceName, engine, pin, limits, signal);
    return engine.passwordVariable ? password : undefined;
  }

  private async inspect(name: string): Promise<Docker.Service | null> {
    return this.docker
      .getService(name)
      .inspect()
      .catch((error: unknown) => {
        if (isGone(error)) return null;
        throw error;
      });
  }

  /**
   * The node and image of a dependency: recorded at its first provision, so every later task runs where
   * its volume is. A node removed from the swarm (`docker node rm`: the operator gave it up) took the
   * volume with it; the dependency is then pinned anew and starts empty on another node.
   */
  private async pinOf(
    serviceName: string,
    engine: Engine,
    resource: OpsResource,
  ): Promise<{ pin: Pin; node: Node }> {
    const nodes = (await this.docker.listNodes()) as Node[];
    const nodeOf = (pin: Pin) => nodes.find((n) => n.ID === pin.node_id);
    const recorded = await this.recorded(serviceName);
    const recordedNode = recorded && nodeOf(recorded);
    if (recorded && recordedNode) return { pin: recorded, node: recordedNode };
    if (recorded) {
      await this.docker.getService(serviceName).remove().catch(ignoreGone);
      await this.db.deleteFrom('swarm_dependencies').where('name', '=', serviceName).execute();
    }
    const image = await this.resolveImage(engine, resource);
    const usable = nodes.filter((n) => n.Status?.State === 'ready' && n.Spec?.Availability === 'active');
    if (usable.length === 0)
      throw new Error(`no node of the swarm is ready and active to run ${serviceName}`);
    const counts = await this.db
      .selectFrom('swarm_dependencies')
      .select(['node_id', (eb) => eb.fn.countAll<string>().as('pinned')])
      .groupBy('node_id')
      .execute();
    const load = (id: string) => Number(counts.find((c) => c.node_id === id)?.pinned ?? 0);
    const [node] = usable.sort((a, b) => load(a.ID) - load(b.ID) || a.ID.localeCompare(b.ID));
    // Another worker may pin it meanwhile: the row that landed first is the pin.
    await this.db
      .insertInto('swarm_dependencies')
      .values({ name: serviceName, node_id: (node as Node).ID, image, created_at: new Date() })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const pin = (await this.recorded(serviceName)) as Pin;
    return { pin, node: nodeOf(pin) as Node };
  }

  private async recorded(serviceName: string): Promise<Pin | undefined> {
    return this.db
      .selectFrom('swarm_dependencies')
      .select(['name', 'node_id', 'image'])
      .where('name', '=', serviceName)
      .executeTakeFirst();
  }

  /** The configured image by its digest in its registry: every node pulls it from there. */
  private async resolveImage(engine: Engine, resource: OpsResource): Promise<string> {
    const image = this.settings.dependencyImages[engine.name];
    try {
      const info = (await this.docker.getImage(image).distribution()) as { Descriptor?: { digest?: string } };
      const digest = info.Descriptor?.digest;
      return digest ? `${image}@${digest}` : image;
    } catch (error) {
      const failed = engineError(
        error,
        `the ${engine.name} image ${image} for ${resource.kind} ${resource.type} ${resource.id} could not ` +
          'be resolved in its registry',
      );
      if (!(failed instanceof TerminalError)) throw failed;
      throw new TerminalError(
        `${failed.message}. Every node of the swarm pulls it: push the images ` +
          '(tools/dependency-images/build.sh builds the defaults) to a registry the nodes reach and set ' +
          imageSettingOf(engine),
      );
    }
  }

  /** The password as a swarm secret (kept by the managers, given to its task as a file in memory). */
  private async ensureSecret(
    name: string,
    labels: Record<string, string>,
    password: string,
  ): Promise<{ id: string; name: string }> {
    try {
      const made = (await this.docker.createSecret({
        Name: name,
        Labels: labels,
        Data: Buffer.from(password).toString('base64'),
      })) as { id: string };
      return { id: made.id, name };
    } catch (error) {
      // Made by an earlier run with the same password (the jobs layer offers the same one again).
      if ((error as { statusCode?: number }).statusCode !== 409)
        throw engineError(error, `the swarm refused the secret ${name}`);
      const secret = (await this.docker.getSecret(name).inspect()) as { ID: string };
      return { id: secret.ID, name };
    }
  }

  private specOf(
    name: string,
    engine: Engine,
    labels: Record<string, string>,
    pin: Pin,
    network: string,
    secret: { id: string; name: string } | null,
    limits: { MemoryBytes?: number },
  ): Docker.ServiceSpec {
    const variables = secret
      ? environmentWithPasswordFile(engine, name, `/run/secrets/${secret.name}`)
      : engine.environment(name, '');
    return {
      Name: pin.name,
      Labels: labels,
      TaskTemplate: {
        ContainerSpec: {
          Image: pin.image,
          // The address services use is also the host name: s3rver serves its own host name path-style.
          Hostname: name,
          Env: Object.entries(variables).map(([k, v]) => `${k}=${v}`),
          Labels: labels,
          Mounts: [
            {
              Type: 'volume',
              Source: pin.name,
              Target: engine.dataDir,
              VolumeOptions: { NoCopy: false, Labels: labels, DriverConfig: { Name: 'local', Options: {} } },
            },
          ],
          // World-readable inside the task only: the official images read it again as their own user.
          Secrets: secret
            ? [
                {
                  SecretID: secret.id,
                  SecretName: secret.name,
                  File: { Name: secret.name, UID: '0', GID: '0', Mode: 0o444 },
                },
              ]
            : [],
          HealthCheck: readinessCheck(engine),
          // A database flushes its data on SIGTERM.
          StopGracePeriod: 30 * SECOND,
        },
        Resources: { Limits: limits },
        RestartPolicy: { Condition: 'any', Delay: 5 * SECOND },
        Placement: { Constraints: [`node.id==${pin.node_id}`] },
        Networks: [{ Target: network, Aliases: [name] }],
      },
      Mode: { Replicated: { Replicas: 1 } },
      EndpointSpec: { Mode: 'dnsrr' },
    };
  }

  /**
   * Until the task runs and its readiness check passes. A start whose tasks keep failing, or that does
   * not come in time (its node down, an image the node cannot pull), fails with the tasks' errors and the
   * service's last output. Failing tasks also remove the service (its volume, secret and pin stay), so it
   * does not restart forever; the next deployment makes it again.
   */
  private async waitRunning(
    serviceName: string,
    engine: Engine,
    pin: Pin,
    limits: { MemoryBytes?: number },
    signal: AbortSignal,
  ) {
    const deadline = Date.now() + this.settings.pullTimeoutMs + READY_TIMEOUT_MS;
    // A task of the spec asked for: after a changed cap, the task it replaces may still run a moment.
    const current = (t: Task) =>
      (t.Spec as { Resources?: { Limits?: { MemoryBytes?: number } } }).Resources?.Limits?.MemoryBytes ===
      limits.MemoryBytes;
    for (;;) {
      signal.throwIfAborted();
      const tasks = await tasksOf(this.docker, serviceName);
      if (running(tasks).some(current)) return;
      const failed = failedTasks(tasks).length >= FAILED_STARTS;
      if (failed || Date.now() > deadline) {
        const why = failed
          ? `its tasks failed: ${taskErrors(tasks)}`
          : `it did not accept connections in time on node ${pin.node_id}: ${this.stateOf(tasks)}`;
        const output = await this.tail(serviceName);
        // A task that keeps failing would restart forever; one waiting for its node starts when it returns.
        if (failed) await this.docker.getService(serviceName).remove().catch(ignoreGone);
        throw new TerminalError(`${serviceName} (${engine.name}) did not start: ${why}.${output}`);
      }
      await sleep(POLL_MS, undefined, { signal }).catch(() => signal.throwIfAborted());
    }
  }

  private stateOf(tasks: Task[]): string {
    const newest = tasks.find((t) => t.DesiredState === 'running');
    if (!newest) return 'no task';
    const { State, Err, Message } = newest.Status;
    return [State, Err || Message].filter(Boolean).join(', ');
  }

  /** The last lines a dependency printed, for a failure reason (its password is in no line: it is a file). */
  private tail(serviceName: string): Promise<string> {
    return lastOutput(
      async () =>
        (await this.docker
          .getService(serviceName)
          .logs({ stdout: true, stderr: true, tail: 10, follow: false })) as unknown as Buffer,
    );
  }

  /** The service, its data (wiped on its node), its secret and its pin: what an earlier run left too. */
  protected async removeAll(name: string): Promise<void> {
    const serviceName = dependencyNameOf(name);
    const pin = await this.recorded(serviceName);
    if (pin) await this.wipe(pin);
    await this.docker.getService(serviceName).remove().catch(ignoreGone);
    await this.docker.getSecret(serviceName).remove().catch(ignoreGone);
    await this.db.deleteFrom('swarm_dependencies').where('name', '=', serviceName).execute();
  }

  /**
   * Empties the dependency's volume: its service becomes (or, gone already, is made again as) one last
   * task on the pinned node that deletes what the volume holds. The swarm stops the engine's task before
   * it starts this one (an update stops first), so nothing writes meanwhile. The empty volume itself
   * stays on the node: only that node's own Engine could remove it. A node that left the swarm took the
   * volume with it: nothing to wipe.
   */
  private async wipe(pin: Pin): Promise<void> {
    const nodes = (await this.docker.listNodes()) as Node[];
    if (!nodes.some((n) => n.ID === pin.node_id)) return;
    const spec: Docker.ServiceSpec = {
      Name: pin.name,
      Labels: { [LABEL.managed]: 'true' },
      TaskTemplate: {
        ContainerSpec: {
          Image: pin.image,
          Command: WIPE_COMMAND,
          User: '0',
          Mounts: [{ Type: 'volume', Source: pin.name, Target: WIPE_MOUNT }],
          HealthCheck: { Test: ['NONE'] },
        },
        RestartPolicy: { Condition: 'none' },
        Placement: { Constraints: [`node.id==${pin.node_id}`] },
      },
      Mode: { Replicated: { Replicas: 1 } },
      EndpointSpec: { Mode: 'dnsrr' },
    };
    const current = await this.inspect(pin.name);
    if (!current) {
      await this.docker.createService(spec).catch((error: unknown) => {
        if ((error as { statusCode?: number }).statusCode !== 409)
          throw engineError(error, `the swarm refused to wipe ${pin.name}`);
      });
    } else {
      const wiping = isWipe(current.Spec?.TaskTemplate as Docker.ContainerTaskSpec | undefined);
      const tasks = wiping ? wipeTasks(await tasksOf(this.docker, pin.name)) : [];
      // A wipe that failed before (its task is not restarted) is forced to run again.
      const again = wiping && tasks.length > 0 && tasks.every((t) => failedTasks([t]).length > 0);
      const force = (current.Spec?.TaskTemplate as { ForceUpdate?: number } | undefined)?.ForceUpdate ?? 0;
      if (!wiping || again) {
        await this.docker
          .getService(current.ID)
          .update({
            ...spec,
            TaskTemplate: { ...spec.TaskTemplate, ForceUpdate: force + 1 },
            version: current.Version?.Index,
          })
          .catch((error: unknown) => {
            throw engineError(error, `the swarm refused to wipe ${pin.name}`);
          });
      }
    }
    const deadline = Date.now() + WIPE_TIMEOUT_MS;
    for (;;) {
      const wiping = wipeTasks(await tasksOf(this.docker, pin.name));
      if (wiping.some((t) => t.Status.State === 'complete')) return;
      const failed = failedTasks(wiping);
      if (failed.length > 0 || Date.now() > deadline) {
        // Retried with the job: a node that is down may come back.
        throw new Error(
          `could not wipe the data of ${pin.name} on node ${pin.node_id}: ${
            failed.length > 0 ? taskErrors(wiping) : this.stateOf(wiping)
          }`,
        );
      }
      await sleep(POLL_MS);
    }
  }
}

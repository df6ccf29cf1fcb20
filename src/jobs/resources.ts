/**
 * ops.json dependencies as resources. A deployment makes what its service declares before the new
 * version starts (and waits for it), updates what changed, and deletes what is no longer declared or was
 * renamed (its id or prefix changed); deleting the service deletes them all. Each step is recorded in
 * `service_resources` before and after the provider's call, and the provider's `ensure` makes a resource
 * at most once, so a job that runs again after a crash finishes the work instead of repeating it.
 * @module
 */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { OpsConfig, OpsResource } from '../domain/ops-json.ts';
import type { Deps } from '../domain/usecases/context.ts';
import type { DeployLog, EnvironmentRef, Resources, ServiceRef } from '../providers/provider.ts';
import {
  beginResource,
  forgetResource,
  listResources,
  markResource,
  resourceMade,
} from '../store/repositories/resources.ts';
import type { ServiceResourceRow, ServiceRow } from '../store/schema.ts';
import { TerminalError } from './errors.ts';

const describe = (r: { kind: string; type: string; id?: string; resource_id?: string }) =>
  `${r.kind} ${r.type} ${r.id ?? r.resource_id}`;

/** What a resource is made from: a change of any of it updates the resource. */
const specOf = (r: OpsResource) => ({ prefix: r.prefix, properties: r.properties });

function resourcesOf(deps: Pick<Deps, 'provider'>, what: string): Resources {
  if (!deps.provider.resources)
    throw new TerminalError(`this provider cannot provision dependencies (${what})`);
  return deps.provider.resources;
}

/** The resources a service gets: previews leave out `skip_preview` ones, others `preview_only` ones. */
function declaredFor(service: Pick<ServiceRow, 'is_preview'>, ops: OpsConfig): OpsResource[] {
  return ops.dependencies.filter((r) => (service.is_preview ? !r.skip_preview : !r.preview_only));
}

async function deleteResource(
  deps: Pick<Deps, 'store' | 'provider'>,
  service: ServiceRef,
  row: ServiceResourceRow,
) {
  const db = deps.store.db;
  await markResource(db, service.id, row, { state: 'deleting' });
  await resourcesOf(deps, describe(row)).delete(service, { ...row, id: row.resource_id });
  await forgetResource(db, service.id, row);
}

/**
 * Brings the service's resources in line with its ops.json and returns the variables their exports
 * resolve to, and which of their values are passwords (to be masked like secrets). A resource the provider cannot make is a TerminalError naming it (the deployment fails
 * with it); other errors are recorded on the resource and retried with the job.
 */
export async function provisionDependencies(
  deps: Pick<Deps, 'store' | 'provider' | 'secretBox'>,
  input: {
    service: ServiceRow;
    environment: EnvironmentRef;
    ops: OpsConfig;
    /** The service's dependencies as listResources gives them, when already read. */
    existing?: ServiceResourceRow[];
  },
  signal: AbortSignal,
  log: DeployLog,
): Promise<{ variables: Record<string, string>; passwords: string[] }> {
  const db = deps.store.db;
  const { service, environment } = input;
  const declared = declaredFor(service, input.ops);
  const existing = input.existing ?? (await listResources(db, service.id));
  const same = (r: OpsResource, row: ServiceResourceRow) =>
    r.kind === row.kind && r.type === row.type && r.id === row.resource_id;

  for (const row of existing) {
    const wanted = declared.find((r) => same(r, row));
    if (wanted && wanted.prefix === row.prefix) continue;
    signal.throwIfAborted();
    log.line('dependencies', `Deleting ${describe(row)} (${wanted ? 'renamed' : 'no longer declared'})`);
    await deleteResource(deps, service, row);
    log.line('dependencies', `Deleted ${describe(row)}`);
  }

  const variables: Record<string, string> = {};
  const passwords: string[] = [];
  for (const resource of declared) {
    signal.throwIfAborted();
    const ref = { kind: resource.kind, type: resource.type, resource_id: resource.id };
    const row = existing.find((r) => same(resource, r) && r.prefix === resource.prefix);
    let attributes: Record<string, string>;
    let password: string | undefined;
    if (row?.state === 'available' && isDeepStrictEqual(row.spec, specOf(resource))) {
      attributes = row.attributes;
      password = row.password ? deps.secretBox.open(row.password) : undefined;
      log.line('dependencies', `${describe(resource)} is in place${where(attributes)}`);
    } else {
      log.line('dependencies', `${row ? 'Updating' : 'Making'} ${describe(resource)}`);
      // The password a new resource gets, sealed before the provider makes anything: a rerun after a
      // crash offers the same one, whatever the provider made with it.
      const sealed = row?.password ?? deps.secretBox.seal(randomBytes(18).toString('base64url'));
      await beginResource(db, service.id, {
        ...ref,
        prefix: resource.prefix,
        spec: specOf(resource),
        sealedPassword: sealed,
      });
      try {
        const made = await resourcesOf(deps, describe(resource)).ensure(
          { service, environment, resource, password: deps.secretBox.open(sealed) },
          signal,
        );
        attributes = made.attributes;
        password = made.password;
      } catch (error) {
        const message = (error as Error).message;
        log.line('dependencies', `${describe(resource)} could not be made: ${message}`);
        if (error instanceof TerminalError) {
          log.end('dependencies', 'failed');
          await markResource(db, service.id, ref, { state: 'failed', error: message.slice(0, 2000) });
          throw new TerminalError(`The dependency ${describe(resource)} could not be made: ${message}`);
        }
        await markResource(db, service.id, ref, { error: message.slice(0, 2000) });
        throw error;
      }
      const sealedPassword = password === undefined ? null : deps.secretBox.seal(password);
      await resourceMade(db, service.id, ref, { attributes, sealedPassword });
      log.line('dependencies', `${describe(resource)} is ready${where(attributes)}`);
    }
    if (password !== undefined) passwords.push(password);
    Object.assign(variables, exportsOf(resource, attributes, password));
  }
  if (declared.length > 0 || existing.length > 0)
    log.end('dependencies', 'success', `${declared.length} dependencies ready`);
  return { variables, passwords };
}

/** The variables a resource's exports resolve to; one naming an attribute it lacks is a TerminalError. */
function exportsOf(
  resource: OpsResource,
  attributes: Record<string, string>,
  password: string | undefined,
): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [name, token] of Object.entries(resource.exports)) {
    const attribute = token.slice(1);
    const value = attribute === 'password' ? password : attributes[attribute];
    if (value === undefined) {
      throw new TerminalError(
        `The dependency ${describe(resource)} has no attribute ${token} (exported as ${name}); ` +
          `it has ${Object.keys(attributes)
            .map((a) => `$${a}`)
            .join(', ')}`,
      );
    }
    variables[name] = value;
  }
  return variables;
}

/**
 * The exports of the service's resources as they are, making, updating and deleting none (a re-apply
 * of the deployment in place, with new domains): a declared resource not available exports nothing.
 */
export async function dependencyExports(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  input: { service: ServiceRow; ops: OpsConfig },
): Promise<{ variables: Record<string, string>; passwords: string[] }> {
  const existing = await listResources(deps.store.db, input.service.id);
  const variables: Record<string, string> = {};
  const passwords: string[] = [];
  for (const resource of declaredFor(input.service, input.ops)) {
    const row = existing.find(
      (r) => r.kind === resource.kind && r.type === resource.type && r.resource_id === resource.id,
    );
    if (row?.state !== 'available') continue;
    const password = row.password ? deps.secretBox.open(row.password) : undefined;
    if (password !== undefined) passwords.push(password);
    Object.assign(variables, exportsOf(resource, row.attributes, password));
  }
  return { variables, passwords };
}

/** Where a resource answers, for the log (never a password: attributes hold none). */
const where = (attributes: Record<string, string>) =>
  attributes.endpoint ? ` at ${attributes.endpoint}` : attributes.name ? ` as ${attributes.name}` : '';

/** Deletes every resource the service had (the service is being deleted). */
export async function removeDependencies(deps: Pick<Deps, 'store' | 'provider'>, service: ServiceRef) {
  for (const row of await listResources(deps.store.db, service.id)) await deleteResource(deps, service, row);
}

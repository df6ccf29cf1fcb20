/**
 * A git service's ops.json, read from its repository at the commit a deployment runs, before anything
 * is made: its dependencies are provisioned from it, and the same commit is then built. Validated by the
 * schema the API's inline `ops_json` goes through (domain/ops-json.ts).
 * @module
 */
import { type OpsConfig, parseOpsJson } from '../domain/ops-json.ts';
import { LONG_TEXT_MAX } from '../domain/service-fields.ts';
import type { DeployLog, DesiredService, Provider } from '../providers/provider.ts';
import { TerminalError } from './errors.ts';

/**
 * The ops config and commit of a deployment of a service with an `ops_json_path`; undefined for any
 * other service (its config is its inline `ops_json`). A missing, oversized or invalid file is a
 * TerminalError that names the file, the commit and, when invalid, each field at fault.
 */
export async function readRepoOps(
  provider: Pick<Provider, 'sources'>,
  desired: DesiredService,
  signal: AbortSignal,
  log: DeployLog,
): Promise<{ ops: OpsConfig; commit: string } | undefined> {
  const { service, target, deploymentId, git } = desired;
  const path = service.ops_json_path;
  if (!path) return undefined;
  if (!provider.sources)
    throw new TerminalError(`this provider cannot read ops_json_path ${path} from a repository`);
  const { commit, text } = await provider.sources.readFile(
    { service, target, deploymentId, path, ...(git ? { git } : {}) },
    signal,
  );
  const where = `${path} at commit ${commit.slice(0, 12)} of ${service.git_repo_full_name}`;
  const fail = (why: string) => {
    log.end('source', 'failed', `${where} ${why}`);
    return new TerminalError(`The ops.json ${where} ${why}`);
  };
  if (text === null) throw fail('does not exist (ops_json_path)');
  if (text.length > LONG_TEXT_MAX)
    throw fail(`is longer than the ${LONG_TEXT_MAX} characters an inline ops_json may have`);
  const parsed = parseOpsJson(text, path, service.type);
  if (parsed.errors.length > 0) {
    const each = parsed.errors.map((e) => (e.error.startsWith(e.field) ? e.error : `${e.field} ${e.error}`));
    throw fail(`is invalid: ${each.join('; ')}`);
  }
  const count = parsed.config.dependencies.length;
  log.line('source', `Read ${where}: ${count} ${count === 1 ? 'dependency' : 'dependencies'} declared`);
  return { ops: parsed.config, commit };
}

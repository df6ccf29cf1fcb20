import type { LogLine, LogQuery } from '../../providers/provider.ts';
import type { ServiceRow } from '../../store/schema.ts';
import { redactor } from '../redact.ts';
import type { Deps } from './context.ts';
import { effectiveSecrets } from './secrets.ts';

/**
 * A service's output as its runtime reports it, with the service's secret values (environment and
 * service scope) masked: a replica that prints its environment does not leak it through the API.
 */
export async function* serviceLogs(
  deps: Pick<Deps, 'store' | 'provider' | 'secretBox'>,
  service: ServiceRow,
  query: LogQuery,
): AsyncIterable<LogLine> {
  const secrets = await effectiveSecrets(deps.store.db, deps.secretBox, service.environment_id, service.id);
  const mask = redactor(Object.values(secrets));
  for await (const line of deps.provider.logs.read(service, query)) yield { ...line, line: mask(line.line) };
}

/**
 * The account's audit log (docs/api.md "Audit log"): who did what, when, from where; newest first,
 * filtered as GET /v1/audit-logs filters, one page at a time.
 * @module
 */
import type { Command } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, noteNextPage, type PageOptions, paged, pageQuery, withSession } from './common.ts';
import type { Column } from './output.ts';
import { instantFlag } from './time-spans.ts';

type AuditPath = paths['/v1/audit-logs']['get'];
type Entry = AuditPath['responses'][200]['content']['application/json']['data']['audit_logs'][number];

const ENTRY_COLUMNS: Column<Entry>[] = [
  { header: 'TIME', value: (e) => e.created_at },
  { header: 'ACTION', value: (e) => e.action },
  { header: 'ACTOR', value: (e) => [e.actor, e.user_email, e.token_name].filter(Boolean).join(' ') },
  { header: 'RESOURCE', value: (e) => [e.resource_type, e.resource_id].filter(Boolean).join(' ') },
  { header: 'FROM', value: (e) => e.client_address },
];

interface AuditOptions extends PageOptions {
  since?: string;
  until?: string;
  action?: string;
  actor?: string;
  resourceType?: string;
  resourceId?: string;
}

export function auditCommands(program: Command): void {
  withExamples(
    paged(
      common(
        program
          .command('audit')
          .description("the account's audit log, newest first: who did what, when and from where")
          .option('--since <time>', 'from this time on (ISO 8601, or back from now: 30m, 2h, 7d, 1w)')
          .option('--until <time>', 'before this time (ISO 8601, or back from now)')
          .option('--action <action>', 'only this action, e.g. service.update or deployment.rollback')
          .option('--actor <actor>', 'only by this user (email or id), token (name or id), or e.g. Operator')
          .option('--resource-type <type>', 'only about this kind of resource, e.g. service')
          .option('--resource-id <id>', 'only about this resource'),
        { env: false },
      ),
    ),
    'audit --since 2h',
    'audit --action service.secrets.replace --since 2026-11-27T00:00:00Z --until 2026-11-28T00:00:00Z',
    'audit --actor ops@example.com -o json',
  ).action(
    withSession<[], AuditOptions>(async (session, _args, o) => {
      const filters = {
        since: instantFlag('--since', o.since),
        until: instantFlag('--until', o.until),
        action: o.action,
        actor: o.actor,
        resource_type: o.resourceType,
        resource_id: o.resourceId,
      };
      const data = unwrap(
        await session.api.GET('/v1/audit-logs', { params: { query: { ...filters, ...pageQuery(o) } } }),
      );
      session.out.list(data.audit_logs, ENTRY_COLUMNS, data);
      // The next page keeps the filters as the API got them: a span back from now would move.
      const again = Object.entries({ ...filters, limit: o.limit })
        .filter(([, v]) => v !== undefined)
        .map(
          ([k, v]) => ` --${k.replace('_', '-')} ${/^[\w.:@+-]+$/.test(String(v)) ? v : JSON.stringify(v)}`,
        );
      noteNextPage(session, data.next_cursor, `audit${again.join('')}`);
    }),
  );
}

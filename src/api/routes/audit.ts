import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { listAuditLogs } from '../../store/repositories/audit.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { authOf } from '../plugins/auth.ts';
import { DateTime, Nullable, pagedListSchema, Uuid } from '../schemas/common.ts';
import { auditView, success } from '../views.ts';

const AuditEntry = Type.Object({
  id: Uuid,
  account_id: Uuid,
  actor: Type.String({ maxLength: 20, description: '`API Token`, or `Operator` for admin API actions' }),
  token_id: Nullable(Uuid),
  action: Type.String({ maxLength: 100 }),
  resource_type: Type.String({ maxLength: 40 }),
  resource_id: Nullable(Uuid),
  environment_id: Nullable(Uuid),
  request_id: Type.String({ maxLength: 128 }),
  client_address: Nullable(
    Type.String({
      maxLength: 64,
      description:
        'the address the request came from (behind a proxy in BERTH_TRUST_PROXY, the one it forwarded); null when no request did (the git poller)',
    }),
  ),
  created_at: DateTime,
});

export const auditRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/audit-logs',
    {
      schema: {
        summary: "The account's audit log, newest first",
        ...pagedListSchema('audit_logs', AuditEntry),
      },
    },
    async (request) => {
      const page = await listAuditLogs(deps.store.db, authOf(request).accountId, pageOf(request.query));
      return success({ audit_logs: page.items.map(auditView), next_cursor: nextCursor(page.next) });
    },
  );
};

import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../domain/usecases/context.ts';
import { listAuditLogs } from '../../store/repositories/audit.ts';
import {
  AUTH_ERRORS,
  DateTime,
  Envelope,
  errorResponses,
  Nullable,
  PageQuery,
  Uuid,
} from '../schemas/common.ts';
import { auditView } from '../views.ts';

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
  created_at: DateTime,
});

export async function auditRoutes(app: FastifyInstance, { deps }: { deps: Deps }) {
  app.get(
    '/audit-logs',
    {
      schema: {
        summary: "The account's audit log, newest first",
        querystring: PageQuery,
        response: {
          200: Envelope(
            Type.Object({
              audit_logs: Type.Array(AuditEntry),
              next_cursor: Nullable(Type.String({ maxLength: 200 })),
            }),
          ),
          ...errorResponses(...AUTH_ERRORS, 422),
        },
      },
    },
    async (request) => {
      const { limit = 50, cursor } = request.query as { limit?: number; cursor?: string };
      const page = await listAuditLogs(deps.store.db, request.auth?.accountId as string, { limit, cursor });
      return {
        message: 'success',
        data: { audit_logs: page.items.map(auditView), next_cursor: page.next_cursor },
      };
    },
  );
}

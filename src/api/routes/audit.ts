import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ValidationError } from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { listAuditLogs } from '../../store/repositories/audit.ts';
import { nextCursor, pageOf } from '../paging.ts';
import { authOf } from '../plugins/auth.ts';
import { DateTime, Nullable, PageQuery, pagedListSchema, Uuid } from '../schemas/common.ts';
import { auditView, success } from '../views.ts';

const AuditEntry = Type.Object({
  id: Uuid,
  account_id: Uuid,
  actor: Type.String({
    maxLength: 20,
    description:
      '`API Token`, `Operator` for admin API actions, or a git host (`GitHub push`); the person and the token are named beside it',
  }),
  token_id: Nullable(Uuid),
  token_name: Nullable(
    Type.String({ maxLength: 100, description: "the token's name; null for operator-issued tokens" }),
  ),
  user_id: Nullable(Uuid),
  user_email: Nullable(
    Type.String({
      maxLength: 254,
      description: "the person acting: the token's owner, or the member an operator action was about",
    }),
  ),
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
  user_agent: Nullable(Type.String({ maxLength: 400, description: "the request's User-Agent" })),
  created_at: DateTime,
});

const AuditQuery = Type.Object(
  {
    ...PageQuery.properties,
    actor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 254,
        description: "a user's or token's id, a user's email, a token's name, or an actor such as `Operator`",
      }),
    ),
    action: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'e.g. `service.create`' }),
    ),
    resource_type: Type.Optional(Type.String({ minLength: 1, maxLength: 40, description: 'e.g. `service`' })),
    resource_id: Type.Optional(Uuid),
    since: Type.Optional(DateTime),
    until: Type.Optional(DateTime),
  },
  { additionalProperties: false },
);

export const auditRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get(
    '/audit-logs',
    {
      config: { role: 'viewer' },
      schema: {
        summary: "The account's audit log, newest first",
        description:
          'Filters (all optional, together): `actor`, `action`, `resource_type`, `resource_id`, and the time range ' +
          '`since` (inclusive) to `until` (exclusive). A token limited to some environments reads only the entries about them.',
        ...pagedListSchema('audit_logs', AuditEntry),
        querystring: AuditQuery,
      },
    },
    async (request) => {
      const q = request.query;
      const since = q.since === undefined ? undefined : new Date(q.since);
      const until = q.until === undefined ? undefined : new Date(q.until);
      if (since && until && until <= since) {
        throw ValidationError.fields([
          { field: 'until', error: 'until must be later than since (since is inclusive, until exclusive)' },
        ]);
      }
      const auth = authOf(request);
      const page = await listAuditLogs(deps.store.db, auth.accountId, pageOf(q), {
        // A caller narrowed to some environments reads only the entries about them.
        environmentIds: auth.environments === null ? undefined : [...auth.environments],
        actor: q.actor,
        action: q.action,
        resourceType: q.resource_type,
        resourceId: q.resource_id,
        since,
        until,
      });
      return success({ audit_logs: page.items.map(auditView), next_cursor: nextCursor(page.next) });
    },
  );
};

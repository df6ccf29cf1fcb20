import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { UnauthorizedError, ValidationError } from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { type Delivery, receiveDelivery } from '../../domain/usecases/git-events.ts';
import type { GitKind } from '../../store/schema.ts';
import type { AuthFailureLimit } from '../plugins/auth-failures.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../plugins/body-guards.ts';
import { Envelope, errorResponses } from '../schemas/common.ts';
import { success } from '../views.ts';

/** The headers each host sends: what happened, its delivery id, and its proof of the secret. */
const HEADERS: Record<GitKind, { event: string; delivery: string; proof: string }> = {
  github: { event: 'x-github-event', delivery: 'x-github-delivery', proof: 'x-hub-signature-256' },
  gitlab: { event: 'x-gitlab-event', delivery: 'x-gitlab-event-uuid', proof: 'x-gitlab-token' },
};

const Outcome = Type.Object({
  delivery_id: Type.String({ maxLength: 200 }),
  duplicate: Type.Boolean({ description: 'a redelivery: nothing was done again' }),
  ignored: Type.Union([Type.String({ maxLength: 300 }), Type.Null()]),
  deployment_ids: Type.Array(Type.String({ format: 'uuid' })),
  preview_service_ids: Type.Array(Type.String({ format: 'uuid' })),
  deleted_service_ids: Type.Array(Type.String({ format: 'uuid' })),
});

const header = (request: FastifyRequest, name: string) => {
  const value = request.headers[name];
  return typeof value === 'string' ? value : '';
};

/**
 * `POST /hooks/github` and `POST /hooks/gitlab`: no bearer token; the host's own proof (an HMAC of the
 * raw body, or the shared token) names the connection. A proof that matches no connection is a 401
 * that leaves nothing but a log line (docs/git.md), and counts as a failed authentication of the client
 * address, as a bad token on /v1 does: an address past the limit is refused (429) before any HMAC is
 * computed or any connection read.
 */
export const hookRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; authFailures: AuthFailureLimit }> = async (
  app,
  { deps, authFailures },
) => {
  // GitHub signs the bytes it sent: the parser keeps them beside the parsed JSON.
  const raw = new WeakMap<FastifyRequest, Buffer>();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    raw.set(request, body as Buffer);
    const text = (body as Buffer).toString('utf8');
    // Judged after the signature: an unsigned body earns a 401, not a parse error. Nesting deeper
    // than any host sends is unreadable too (the body guards walk what is parsed).
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(null, undefined);
    }
  });

  for (const kind of ['github', 'gitlab'] as const) {
    app.post(
      `/${kind}`,
      {
        schema: {
          summary: `Receive a ${kind === 'github' ? 'GitHub' : 'GitLab'} webhook (docs/git.md)`,
          description:
            kind === 'github'
              ? "No bearer token: X-Hub-Signature-256 (HMAC-SHA256 of the raw body with a connection's webhook secret) names the connection. X-GitHub-Event and X-GitHub-Delivery are required; a delivery id seen before does nothing. push deploys auto_deploy services; pull_request opened/synchronize/reopened deploys the preview, closed deletes it."
              : "No bearer token: X-Gitlab-Token (a connection's webhook secret) names the connection. X-Gitlab-Event and X-Gitlab-Event-UUID are required; a delivery id seen before does nothing. Push Hook deploys auto_deploy services.",
          security: [],
          body: Type.Unknown({ description: "the host's event payload, as it sent it" }),
          response: { 200: Envelope(Outcome), ...errorResponses(401, 422, 429, 500) },
        },
      },
      async (request, reply) => {
        const names = HEADERS[kind];
        const delivery: Delivery = {
          kind,
          id: header(request, names.delivery),
          event: header(request, names.event),
          proof: header(request, names.proof),
          raw: raw.get(request) ?? Buffer.alloc(0),
          payload: request.body,
        };
        try {
          const outcome = await authFailures.guard(request, reply, () => {
            if (!delivery.proof) throw new UnauthorizedError();
            if (!delivery.id || delivery.id.length > 200 || !delivery.event) {
              throw ValidationError.fields([
                { field: names.delivery, error: `${names.delivery} and ${names.event} headers are required` },
              ]);
            }
            return receiveDelivery(deps, delivery);
          });
          request.log.info({ kind, delivery: delivery.id, event: delivery.event, outcome }, 'git webhook');
          return success(outcome);
        } catch (error) {
          if (error instanceof UnauthorizedError)
            request.log.warn({ kind, delivery: delivery.id }, 'git webhook not signed by any connection');
          throw error;
        }
      },
    );
  }
};

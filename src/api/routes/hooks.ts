import type { Readable } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { UnauthorizedError, ValidationError } from '../../domain/errors.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { type Delivery, MAX_HOOK_CANDIDATES, receiveDelivery } from '../../domain/usecases/git-events.ts';
import type { GitKind } from '../../store/schema.ts';
import { clientAddress } from '../client-address.ts';
import type { AuthFailureLimit } from '../plugins/auth-failures.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../plugins/body-guards.ts';
import { Envelope, errorResponses, Uuid } from '../schemas/common.ts';
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

/** GitHub caps a delivery at 25 MB; Berth reads GitLab's up to the same. */
export const HOOK_BODY_LIMIT_BYTES = 25 * 1024 * 1024;
const TOO_LARGE = `larger than ${HOOK_BODY_LIMIT_BYTES / 1024 / 1024} MiB, the most a git host sends`;

/** An event name as the hosts send them (`push`, `Push Hook`): short, letters, digits, spaces, `_.-`. */
const EVENT_NAME = /^[A-Za-z0-9_ .-]{1,100}$/;
const DELIVERY_ID = /^[\x21-\x7e]{1,200}$/;

/** The body, chunk by chunk up to the limit. */
async function readBody(
  stream: Readable | undefined,
  declaredLength: string | undefined,
  onChunk: (chunk: Buffer) => void,
): Promise<Buffer> {
  if (Number(declaredLength) > HOOK_BODY_LIMIT_BYTES) throw ValidationError.body(TOO_LARGE);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream ?? []) {
    size += (chunk as Buffer).length;
    if (size > HOOK_BODY_LIMIT_BYTES) throw ValidationError.body(TOO_LARGE);
    onChunk(chunk as Buffer);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

/**
 * A body's JSON, or undefined when it is not JSON or nests deeper than any host sends: judged after the
 * signature, so an unsigned body earns a 401, not a parse error.
 */
function parseBody(raw: Buffer): unknown {
  const text = raw.toString('utf8');
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * `POST /hooks/{kind}/{connection}` and `POST /hooks/{kind}`: no bearer token; the host's own proof (an
 * HMAC of the raw body, or the shared token) names the connection: the one in the URL, else one of the
 * few the payload's installation or repository can belong to (docs/git.md). A proof that matches none
 * is a 401 that leaves nothing but a log line, and counts as a failed delivery of the client address:
 * an address past the limit is refused (429) before any body is read. Deliveries have their own budget,
 * apart from API tokens', so a misconfigured secret does not lock the address out of the API.
 */
export const hookRoutes: FastifyPluginAsyncTypebox<{ deps: Deps; failures: AuthFailureLimit }> = async (
  app,
  { deps, failures },
) => {
  // The body is read by the handler, as it streams in: GitHub signs its bytes, and up to 25 MB of them.
  const bodies = new WeakMap<FastifyRequest, Readable>();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', (request, payload, done) => {
    bodies.set(request, payload as Readable);
    done(null, undefined);
  });

  for (const kind of ['github', 'gitlab'] as const) {
    const names = HEADERS[kind];
    const host = kind === 'github' ? 'GitHub' : 'GitLab';
    const proof =
      kind === 'github'
        ? "X-Hub-Signature-256 (HMAC-SHA256 of the raw body with the connection's webhook secret)"
        : "X-Gitlab-Token (the connection's webhook secret)";
    const does =
      kind === 'github'
        ? 'push deploys auto_deploy services; pull_request opened/synchronize/reopened deploys the preview, closed deletes it.'
        : 'Push Hook deploys auto_deploy services.';
    const schema = (summary: string, routing: string, statuses: number[] = []) => ({
      summary,
      description: `No bearer token: ${proof} proves the delivery; ${routing} ${names.event} and ${names.delivery} are required; a delivery id or pushed commit seen before does nothing. ${does} Bodies up to 25 MiB.`,
      security: [],
      body: Type.Unknown({ description: "the host's event payload, as it sent it" }),
      response: { 200: Envelope(Outcome), ...errorResponses(401, ...statuses, 422, 429, 500) },
    });
    const receive = async (request: FastifyRequest, reply: FastifyReply, connectionId?: string) => {
      const delivery: Delivery = {
        kind,
        id: header(request, names.delivery),
        clientAddress: clientAddress(request),
        event: header(request, names.event),
        proof: header(request, names.proof),
        connectionId,
        read: (onChunk) => readBody(bodies.get(request), request.headers['content-length'], onChunk),
        parse: parseBody,
      };
      try {
        const outcome = await failures.guard(request, reply, () => {
          if (!delivery.proof) throw new UnauthorizedError();
          const errors = [
            ...(DELIVERY_ID.test(delivery.id)
              ? []
              : [
                  {
                    field: names.delivery,
                    error: `${names.delivery} is required: at most 200 visible characters`,
                  },
                ]),
            ...(EVENT_NAME.test(delivery.event)
              ? []
              : [
                  {
                    field: names.event,
                    error: `${names.event} is required: at most 100 letters, digits, spaces and _.-`,
                  },
                ]),
          ];
          if (errors.length > 0) throw ValidationError.fields(errors);
          return receiveDelivery(deps, delivery);
        });
        request.log.info({ kind, delivery: delivery.id, event: delivery.event, outcome }, 'git webhook');
        return success(outcome);
      } catch (error) {
        if (error instanceof UnauthorizedError)
          request.log.warn(
            { kind, delivery: delivery.id.slice(0, 200) },
            `git webhook not signed by ${connectionId ? 'its connection' : 'any connection'}`,
          );
        throw error;
      }
    };
    app.post(
      `/${kind}/:connectionId`,
      {
        schema: {
          ...schema(
            `Receive a ${host} webhook for one connection (docs/git.md)`,
            'the connection is the one in the path, and only its secret is checked; a path id that is not a UUID is 404.',
            [404],
          ),
          params: Type.Object({
            connectionId: { ...Uuid, description: 'the git connection id' },
          }),
        },
      },
      (request, reply) => receive(request, reply, request.params.connectionId),
    );
    app.post(
      `/${kind}`,
      {
        schema: schema(
          `Receive a ${host} webhook (docs/git.md)`,
          `the connection is found by the App installation or the repository the payload names (at most ${MAX_HOOK_CANDIDATES} are checked).`,
        ),
      },
      (request, reply) => receive(request, reply),
    );
  }
};

import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConflictError, UNKNOWN_MESSAGE, ValidationError } from '../../domain/errors.ts';
import type { Db } from '../../store/database.ts';
import {
  claimKey,
  findKey,
  type KeyClaim,
  purgeExpiredKeys,
  recordAnswer,
  releaseKey,
  type StoredKey,
} from '../../store/repositories/idempotency-keys.ts';
import type { SecretBox } from '../../store/secret-box.ts';

/**
 * `Idempotency-Key` on POST, as Stripe does it: the first request with a key runs and its answer
 * (status, body and its own headers) is stored with the key in the database; a later request with the same key and the
 * same request (method, path, query and body) gets that answer again, marked `Idempotent-Replayed:
 * true`, for 24 hours and across restarts. The same key with a different request is a 422. Keys belong
 * to the caller (an account; the operator for /admin/v1). A request that arrives while the first is
 * still running waits for its answer, so the work is done once. The work's own transaction marks the key
 * done (use cases confirm `request.idempotency` with their audit entry), so a key is never run twice once
 * its work committed, even when the process died before the answer was stored. A refusal (4xx) or an
 * unexpected failure (500 `unknown`) before the work committed is not stored: a retry runs again. The stored answer is
 * sealed with the master key: an answer may carry a one-time secret (an issued API token, a webhook's
 * signing secret) that Berth otherwise never keeps in the clear.
 */
declare module 'fastify' {
  interface FastifyRequest {
    idempotency: KeyClaim | undefined;
  }
}

const KEY = /^[\x21-\x7e]{1,255}$/;
const FIELD = 'Idempotency-Key';
/** How long a request waits for the answer of the same request still running elsewhere. */
const WAIT_MS = 10_000;
const PURGE_EVERY_MS = 3_600_000;
/**
 * Headers that belong to an answer and are replayed with it: the id of a service created before its
 * deploy_now failed is only in `x-berth-service-id`, and a retry is when a client needs it most.
 */
const REPLAYED_HEADERS = ['x-berth-service-id'];

function answerHeaders(reply: FastifyReply): Record<string, string> | null {
  const kept = REPLAYED_HEADERS.flatMap((name) => {
    const value = reply.getHeader(name);
    return value === undefined ? [] : [[name, String(value)]];
  });
  return kept.length > 0 ? Object.fromEntries(kept) : null;
}

function fingerprintOf(request: FastifyRequest): string {
  return createHash('sha256')
    .update(JSON.stringify([request.method, request.url, request.body ?? null]))
    .digest('hex');
}

async function answered(db: Db, scope: string, key: string): Promise<StoredKey | undefined> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const stored = await findKey(db, scope, key);
    if (!stored || stored.status !== null || Date.now() > deadline) return stored;
    await sleep(50);
  }
}

export function registerIdempotency(
  app: FastifyInstance,
  db: Db,
  box: SecretBox,
  scopeOf: (request: FastifyRequest) => string,
): void {
  let purgedAt = 0;
  app.decorateRequest('idempotency', undefined);
  const claim = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = request.headers['idempotency-key'];
    if (key === undefined) return;
    if (typeof key !== 'string' || !KEY.test(key)) {
      throw ValidationError.fields([
        { field: FIELD, error: `${FIELD} must be 1 to 255 visible ASCII characters, such as a UUID` },
      ]);
    }
    if (Date.now() - purgedAt > PURGE_EVERY_MS) {
      purgedAt = Date.now();
      await purgeExpiredKeys(db);
    }
    const scope = scopeOf(request);
    const fingerprint = fingerprintOf(request);
    const claim = await claimKey(db, scope, key, fingerprint);
    if (claim) {
      request.idempotency = claim;
      return;
    }
    const stored = await answered(db, scope, key);
    if (stored && stored.fingerprint !== fingerprint) {
      throw ValidationError.fields([
        { field: FIELD, error: `${FIELD} was already used for a different request; use a new key` },
      ]);
    }
    if (stored?.status === null && stored.done) {
      throw new ConflictError(
        `The request with this ${FIELD} was done, but its server stopped before answering; ` +
          'look the result up (GET) instead of retrying it',
      );
    }
    if (!stored || stored.status === null) {
      throw new ConflictError(`A request with this ${FIELD} is still running; retry it later`);
    }
    if (stored.answer_headers !== null) reply.headers(JSON.parse(stored.answer_headers));
    return reply
      .code(stored.status)
      .header('idempotent-replayed', 'true')
      .header('content-type', 'application/json; charset=utf-8')
      .send(stored.body_sealed === null ? '' : box.open(stored.body_sealed));
  };
  const record = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const held = request.idempotency;
    if (!held) return payload;
    request.idempotency = undefined;
    const body = typeof payload === 'string' ? payload : '';
    const unexpected = reply.statusCode === 500 && body.includes(UNKNOWN_MESSAGE);
    // A refusal (bad body, missing feature, conflict) did nothing: as Stripe, a retry runs again (and
    // succeeds once its cause is fixed) rather than getting a stale error marked replayed for 24 hours.
    const refused = reply.statusCode >= 400 && reply.statusCode < 500;
    if (!((unexpected || refused) && (await releaseKey(db, held))))
      await recordAnswer(db, held, reply.statusCode, box.seal(body), answerHeaders(reply));
    return payload;
  };
  // On POST routes only (the key means nothing elsewhere): the others pay nothing per request. First
  // of the route's own hooks, as this context's hook it replaces was.
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().includes('POST')) return;
    route.preHandler = [claim, ...[route.preHandler ?? []].flat()];
    route.onSend = [record, ...[route.onSend ?? []].flat()];
  });
}

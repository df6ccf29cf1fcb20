import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { noteUnreadBody } from './client-errors.ts';

/**
 * What happens once a response has finished, told by Fastify's log controller instead of onResponse
 * hooks, so a request passes no onResponse phase: one access-log line (instead of Fastify's two, since
 * pollers make many requests), and client-errors.ts's mark for a request answered before its body came.
 */
export class ResponseFinished extends LogController {
  /** Also told of each finished request: the HTTP metrics, when they are collected. */
  private readonly observe: ((request: FastifyRequest, reply: FastifyReply) => void) | undefined;

  constructor(observe?: (request: FastifyRequest, reply: FastifyReply) => void) {
    super({ disableRequestLogging: true });
    this.observe = observe;
  }

  override requestCompleted(
    _error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    noteUnreadBody(request);
    logAccess(
      request.log,
      request.method,
      request.url,
      clientAddress(request),
      reply.statusCode,
      reply.elapsedTime,
    );
    this.observe?.(request, reply);
  }
}

/** The access line of a finished request (fast-polls.ts writes its own with it). */
export function logAccess(
  log: FastifyBaseLogger,
  method: string,
  url: string,
  client: string,
  status: number,
  elapsedMs: number,
): void {
  log.info({ method, url, client, status, ms: Math.round(elapsedMs) }, 'request');
}

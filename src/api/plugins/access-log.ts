import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
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
    request.log.info(
      {
        method: request.method,
        url: request.url,
        client: clientAddress(request),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
      },
      'request',
    );
    this.observe?.(request, reply);
  }
}

import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requestIdFor } from './request-id.ts';

/**
 * Requests Node's HTTP parser refuses (malformed framing, oversized headers) or that do not arrive in
 * time never become a Fastify request, so no hook or error handler sees them. This answers them on the
 * raw socket in the spec's error shape, with an x-request-id like every other answer, and closes the
 * connection (after a framing error nothing more can be read from it safely).
 */
export interface ClientErrorLimits {
  requestTimeoutMs: number;
  maxHeaderBytes: number;
}

interface ParserError extends Error {
  code?: string;
  /** llhttp's fixed explanation, e.g. "Duplicate Content-Length". */
  reason?: string;
}

function answerFor(error: ParserError, limits: ClientErrorLimits): { status: number; message: string } {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return {
      status: 408,
      message: `The request did not arrive within ${limits.requestTimeoutMs / 1000} seconds`,
    };
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return {
      status: 431,
      message: `The request headers are larger than ${limits.maxHeaderBytes / 1024} KB`,
    };
  }
  // The reason is llhttp's own fixed text, never the caller's bytes; anything else is left out.
  const reason =
    typeof error.reason === 'string' && /^[\w .,'-]{1,100}$/.test(error.reason) ? error.reason : '';
  return {
    status: 400,
    message: `The request is not valid HTTP/1.1${reason ? ` (${reason})` : ''}`,
  };
}

/**
 * Connections whose request was answered before its body had arrived (a 401 does not wait for the
 * body): a late error there closes the connection without a second answer.
 */
const answeredEarly = new WeakSet<Socket>();

/** The spec's error shape, for answers written outside Fastify's reply (no route serializes them). */
function errorBody(message: string): string {
  return JSON.stringify({ error_code: 'validation', message, errors: null });
}

const NO_HOST = 'An HTTP/1.1 request must have a Host header';
const UNMET_EXPECTATION = 'The Expect header cannot be met: the only expectation served is 100-continue';

/**
 * Node answers a request without Host with an empty 400 (the server is built with requireHostHeader
 * off, so it reaches Fastify) and an unmet Expect with an empty 417: both answered here in the error
 * shape. True when `request` was answered so (app.ts asks in its first onRequest hook: no hook of its
 * own per request).
 */
export function answeredMissingHost(request: FastifyRequest, reply: FastifyReply): boolean {
  if (request.headers.host !== undefined || request.raw.httpVersion !== '1.1') return false;
  reply
    .code(400)
    .header('connection', 'close')
    .send({ error_code: 'validation', message: NO_HOST, errors: null });
  return true;
}

export function registerClientErrors(app: FastifyInstance): void {
  app.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const body = errorBody(UNMET_EXPECTATION);
    response.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestIdFor(request),
      connection: 'close',
    });
    response.end(body);
  });
}

/**
 * Called once each response has finished (access-log.ts): a request answered before its body had all
 * arrived marks its connection until the unread body has been read (the connection then carries the
 * next request).
 */
export function noteUnreadBody(request: FastifyRequest): void {
  if (!request.raw.complete) {
    const socket = request.raw.socket;
    answeredEarly.add(socket);
    request.raw.once('end', () => answeredEarly.delete(socket));
  }
}

/** Fastify binds the handler to the app, hence `this`. */
export function clientErrorHandler(limits: ClientErrorLimits) {
  return function (this: FastifyInstance, error: ParserError, socket: Socket): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const { status, message } = answerFor(error, limits);
    this.log.debug({ code: error.code, status }, 'client error');
    if (socket.writable && !answeredEarly.has(socket)) {
      const body = errorBody(message);
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
          'content-type: application/json; charset=utf-8\r\n' +
          `content-length: ${Buffer.byteLength(body)}\r\n` +
          `x-request-id: ${randomUUID()}\r\n` +
          'connection: close\r\n\r\n' +
          body,
      );
    }
    socket.destroy(error);
  };
}

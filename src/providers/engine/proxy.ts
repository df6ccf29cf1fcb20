/**
 * How the ingress hands one admitted request to a replica and streams its answer back: undici's
 * request on the ingress's Agent (a keep-alive pool per replica), with no layer in between. It replaced
 * @fastify/reply-from, whose per-request work (URL building and caching, header copies, a retry
 * wrapper) cost about a fifth of the ingress's CPU per proxied request (docs/performance.md, HTTPS).
 * @module
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Dispatcher, errors } from 'undici';

/**
 * Headers that describe one connection, not the message (RFC 9110 7.6.1), in either direction; and
 * `expect`, which Node's server has already answered (100 Continue) for the client.
 */
const CONNECTION_ONLY = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** `headers` without the connection-only ones, nor those its Connection header names. */
function messageHeaders(headers: IncomingHttpHeaders, alsoDrop?: string): Record<string, string | string[]> {
  const listed = typeof headers.connection === 'string' ? headers.connection.toLowerCase().split(',') : [];
  const dropped = new Set(listed.map((name) => name.trim()));
  const kept: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || CONNECTION_ONLY.has(name) || dropped.has(name) || name === alsoDrop) continue;
    kept[name] = value;
  }
  return kept;
}

/** A path that climbs out of its directory (`..` as a segment, encoded or not) is refused, as before. */
function climbs(url: string): boolean {
  let decoded: string;
  try {
    decoded = decodeURIComponent(url);
  } catch {
    return true;
  }
  return decoded === '..' || decoded.includes('/..') || decoded.includes('../');
}

/** A request body that outgrew the service's request_body_size while it streamed (no Content-Length announced it). */
export class BodyOverLimit extends Error {
  readonly limitMb: number;
  constructor(limitMb: number) {
    super(`request bodies are limited to ${limitMb} MB`);
    this.limitMb = limitMb;
  }
}

export interface ProxyTarget {
  /** `http://host:port` of the replica. */
  origin: string;
  /** read_timeout: how long the replica may take to start answering, and between body chunks. */
  readTimeoutMs: number;
  /** send_timeout: how long the client may stall while the answer is written. */
  sendTimeoutMs: number;
  /** Whether the client reached the ingress over TLS (X-Forwarded-Proto). */
  secure: boolean;
}

/** Sends the request on to `to` and the answer back on `reply`; every failure is answered in plain text. */
export function proxy(
  agent: Dispatcher,
  request: FastifyRequest,
  reply: FastifyReply,
  to: ProxyTarget,
): FastifyReply {
  const refuse = (code: number, message: string) => reply.code(code).type('text/plain').send(`${message}\n`);
  const path = request.raw.url ?? '/';
  if (!path.startsWith('/') || climbs(path))
    return refuse(400, 'the request path is not one a service can be asked for');
  const headers = messageHeaders(request.headers, 'expect');
  headers['x-forwarded-for'] = request.raw.socket.remoteAddress ?? '';
  headers['x-forwarded-proto'] = to.secure ? 'https' : 'http';
  agent.request(
    {
      origin: to.origin,
      path,
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body: request.body as Readable | undefined,
      headersTimeout: to.readTimeoutMs,
      bodyTimeout: to.readTimeoutMs,
    },
    (error, response) => {
      if (error) {
        if (!reply.sent) refuse(...failure(error, to));
        return;
      }
      // The client left while the replica answered: nobody reads the answer.
      if (request.raw.socket.destroyed) {
        response.body.destroy();
        return;
      }
      try {
        reply.code(response.statusCode);
      } catch {
        response.body.destroy();
        refuse(502, 'the service answered with an invalid status code');
        return;
      }
      reply.headers(messageHeaders(response.headers));
      // An HTTP/1.1 connection is reusable only once its request body was read: the replica answered first.
      if (!request.raw.complete) reply.header('connection', 'close');
      reply.raw.setTimeout(to.sendTimeoutMs, () => reply.raw.destroy());
      reply.send(response.body);
    },
  );
  return reply;
}

/** The status and plain words for a request the replica did not answer. */
function failure(error: Error, to: ProxyTarget): [number, string] {
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError) {
    return [504, `the service did not answer within its read_timeout (${to.readTimeoutMs / 1000} s)`];
  }
  if (error instanceof errors.ConnectTimeoutError) {
    return [504, 'the service did not accept a connection within its connection_timeout'];
  }
  if (error instanceof BodyOverLimit) return [413, error.message];
  return [502, 'the service could not be reached'];
}

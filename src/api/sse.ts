import { once } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { OpenStreams } from './open-streams.ts';
import { stillAllowed } from './plugins/roles.ts';
import { credentialOf } from './plugins/sessions.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The streams open on this server, by token and account (open-streams.ts). */
    openStreams: OpenStreams;
  }
}

/** A comment line this often keeps proxies and clients from taking a quiet stream for a dead one. */
const HEARTBEAT_MS = 15_000;
/** What a client's EventSource waits before it reconnects after the connection drops. */
const RETRY_MS = 2_000;

export interface SseStream {
  /** Aborts when the client goes away (or end() was called): producers stop on it. */
  readonly closed: AbortSignal;
  /** One event; waits while the client reads slower than events come (backpressure). */
  send(event: string, data: unknown, id?: string): Promise<void>;
  end(): void;
}

/**
 * Answers a request with a server-sent events stream (text/event-stream): `id:` (when given) is the
 * cursor a client passes back as `Last-Event-ID`, `event:` names the kind, `data:` is one line of JSON.
 * The headers the hooks set so far (x-request-id, rate limit) go with it. One stream more than the
 * caller's token or account may hold is refused (429) before anything is sent; the stream ends when its
 * token may no longer read it (revoked, its member removed, its role lowered or its environments narrowed).
 */
export function openSse(request: FastifyRequest, reply: FastifyReply): SseStream {
  let ending: () => void = () => {};
  const leave = request.server.openStreams.admit(
    request.auth,
    credentialOf(request),
    () => ending(),
    stillAllowed(request),
  );
  reply.hijack();
  const raw = reply.raw;
  const set = Object.entries(reply.getHeaders()).filter(([, v]) => v !== undefined);
  raw.writeHead(200, {
    ...(Object.fromEntries(set) as Record<string, string | number | string[]>),
    'x-request-id': request.id,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  raw.write(`retry: ${RETRY_MS}\n\n`);
  const controller = new AbortController();
  const heartbeat = setInterval(() => raw.write(': keep-alive\n\n'), HEARTBEAT_MS);
  ending = () => {
    close();
    raw.end();
  };
  const close = () => {
    clearInterval(heartbeat);
    leave();
    controller.abort();
  };
  raw.on('close', close);
  // A HEAD answer has no body: Node holds its headers until the response ends, so it ends at once.
  if (request.method === 'HEAD') ending();
  return {
    closed: controller.signal,
    async send(event, data, id) {
      if (controller.signal.aborted) return;
      // JSON.stringify never emits a raw line break, so one data line carries the whole value.
      const frame = `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
      if (!raw.write(frame)) await once(raw, 'drain', { signal: controller.signal }).catch(() => undefined);
    },
    end: ending,
  };
}

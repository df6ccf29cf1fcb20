import net from 'node:net';
import type { App } from '../../src/api/app.ts';

/**
 * Raw HTTP/1.1 for tests that must send what no well-behaved client would (app.inject and fetch refuse
 * or repair malformed requests). Requests are built as strings and written to a plain TCP socket.
 */

/** A request line, headers in the given order (repeats allowed), a blank line and a body, as bytes. */
export function rawRequest(method: string, path: string, headers: [string, string][], body = ''): string {
  return `${method} ${path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`;
}

const HOST: [string, string] = ['host', 'localhost'];
const JSON_TYPE: [string, string] = ['content-type', 'application/json'];

/**
 * Requests Node's HTTP parser refuses before Berth sees them (request smuggling shapes and oversized
 * headers). Each is a complete request on its own; `token` is sent as a bearer token when given, so
 * that a refusal cannot be the 401 of a missing token.
 */
export function malformedRequests(url: string, token?: string): { name: string; raw: string }[] {
  const auth: [string, string][] = token ? [['authorization', `Bearer ${token}`]] : [];
  const body = '{}';
  return [
    {
      name: 'two Content-Length headers',
      raw: rawRequest(
        'POST',
        url,
        [HOST, ...auth, JSON_TYPE, ['content-length', '2'], ['content-length', '5']],
        body,
      ),
    },
    {
      name: 'Content-Length and Transfer-Encoding',
      raw: rawRequest(
        'POST',
        url,
        [HOST, ...auth, JSON_TYPE, ['content-length', '2'], ['transfer-encoding', 'chunked']],
        `2\r\n${body}\r\n0\r\n\r\n`,
      ),
    },
    {
      name: 'a NUL character in a header value',
      raw: rawRequest('GET', url, [HOST, ...auth, ['x-note', 'a\u0000b']]),
    },
    {
      name: 'an 80 KB header',
      raw: rawRequest('GET', url, [HOST, ...auth, ['x-padding', 'a'.repeat(80 * 1024)]]),
    },
    {
      name: 'a space inside a header name',
      raw: rawRequest('GET', url, [HOST, ...auth, ['x bad', '1']]),
    },
    {
      name: 'an invalid chunk size',
      raw: rawRequest(
        'POST',
        url,
        [HOST, ...auth, JSON_TYPE, ['transfer-encoding', 'chunked']],
        'zz\r\n{}\r\n0\r\n\r\n',
      ),
    },
  ];
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Whether the server closed the connection after answering. */
  closed: boolean;
}

/**
 * Parses the first final response in `text` (enough for the short JSON answers these tests read): an
 * interim `100 Continue` before it is skipped.
 */
export function parseRawResponse(raw: string, closed: boolean): RawResponse {
  const text = raw.replace(/^(HTTP\/1\.1 1\d\d [^\r]*\r\n(?:[^\r]+\r\n)*\r\n)+/, '');
  const end = text.indexOf('\r\n\r\n');
  const head = end === -1 ? text : text.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = end === -1 ? '' : text.slice(end + 4);
  if (headers['content-length'] !== undefined) body = body.slice(0, Number(headers['content-length']));
  return { status: Number(statusLine.split(' ')[1]), headers, body, closed };
}

/** Opens a TCP connection to a listening app (`app.listen({ port: 0 })` first). */
export function connect(app: App): Promise<net.Socket> {
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('the app is not listening on TCP');
  return new Promise((resolve, reject) => {
    const socket = net.connect(address.port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * Writes `raw` on a fresh connection and reads until the server closes it or `timeoutMs` passes
 * (a server that keeps the connection open after answering is reported with `closed: false`).
 */
export async function sendRaw(app: App, raw: string, timeoutMs = 5000): Promise<RawResponse> {
  const socket = await connect(app);
  return new Promise((resolve) => {
    let text = '';
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(parseRawResponse(text, closed));
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.write(raw);
  });
}

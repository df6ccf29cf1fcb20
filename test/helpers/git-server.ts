import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { importSPKI, jwtVerify } from 'jose';

/**
 * A real git server on loopback: Node's http server runs `git http-backend` (git's own smart-HTTP CGI)
 * for every request under the repositories in `root`, behind basic auth. Each accepted credential is a
 * `user:password` pair. With `app`, it also answers GitHub's installation-token call
 * (`POST /api/v3/app/installations/{id}/access_tokens`, as under GitHub Enterprise): the JWT must verify
 * with the App's public key and name the App as issuer; the token it hands out is then accepted.
 */
export interface GitServer {
  url: string;
  /** Requests refused for their credential. */
  refused: number;
  /** Installation tokens handed out. */
  minted: string[];
  close(): Promise<void>;
}

export async function startGitServer(options: {
  root: string;
  credentials: string[];
  app?: { id: string; installationId: string; publicKeyPem: string };
}): Promise<GitServer> {
  const accepted = new Set(options.credentials.map((c) => Buffer.from(c).toString('base64')));
  const state = { refused: 0, minted: [] as string[] };
  const publicKey = options.app ? await importSPKI(options.app.publicKeyPem, 'RS256') : undefined;

  const server = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://git.invalid');
    const tokenPath = options.app && `/api/v3/app/installations/${options.app.installationId}/access_tokens`;
    if (request.method === 'POST' && url.pathname === tokenPath && publicKey && options.app) {
      const jwt = (request.headers.authorization ?? '').replace(/^Bearer /, '');
      jwtVerify(jwt, publicKey, { issuer: options.app.id, algorithms: ['RS256'] }).then(
        () => {
          const token = `ghs_${state.minted.length}${Math.random().toString(36).slice(2)}`;
          state.minted.push(token);
          accepted.add(Buffer.from(`x-access-token:${token}`).toString('base64'));
          response.writeHead(201, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ token, expires_at: new Date(Date.now() + 3_600_000).toISOString() }));
        },
        () => {
          response.writeHead(401, { 'content-type': 'application/json' });
          response.end('{"message":"A JSON web token could not be decoded"}');
        },
      );
      return;
    }
    const basic = /^Basic (.+)$/.exec(request.headers.authorization ?? '')?.[1];
    if (!basic || !accepted.has(basic)) {
      state.refused++;
      response.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
      response.end();
      return;
    }
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: options.root,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: request.method,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: request.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
        REMOTE_USER: 'git',
        REMOTE_ADDR: '127.0.0.1',
      },
    });
    request.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        response.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const at = line.indexOf(':');
        const name = line.slice(0, at).trim().toLowerCase();
        const value = line.slice(at + 1).trim();
        if (name === 'status') status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      response.writeHead(status, headers);
      response.write(head.subarray(end + 4));
    });
    cgi.on('close', () => response.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get refused() {
      return state.refused;
    },
    minted: state.minted,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

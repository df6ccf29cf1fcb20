/**
 * Loaded into `berth serve` with `node --import` by bench/poll-process.ts: the bench row's baseline
 * handler (node:http, two headers, the body as a Buffer) on a port of its own inside Berth's process, so
 * that its CPU a request shows what the process (the app, the database, the job worker) adds to the same
 * node:http work. Its port goes to BENCH_HANDLER_PORT_FILE; the body is read from BENCH_HANDLER_BODY_FILE
 * once the bench has written it.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const portFile = process.env.BENCH_HANDLER_PORT_FILE as string;
const bodyFile = process.env.BENCH_HANDLER_BODY_FILE as string;
let body: Buffer | undefined;
const server = http.createServer((_request, response) => {
  body ??= fs.readFileSync(bodyFile);
  response.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': body.length,
  });
  response.end(body);
});
// Unref'd: it must not keep a `berth serve` that is shutting down alive.
server.unref();
server.listen(0, '127.0.0.1', () =>
  fs.writeFileSync(portFile, String((server.address() as AddressInfo).port)),
);

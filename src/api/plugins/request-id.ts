import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Echo the caller's x-request-id when it is sane (short, printable, no spaces), else make a UUID. */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdFor(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SANE.test(given) ? given : randomUUID();
}

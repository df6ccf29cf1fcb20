import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { isPublicAddress, literalAddress, WEBHOOK_TIMEOUT_MS } from '../domain/webhook-rules.ts';

/** A receiver's address that policy refuses: not worth a retry until the operator or the DNS changes. */
export class RefusedAddressError extends Error {}

/**
 * Resolves like the system does, and refuses the connection when any address is not public: the check
 * is on the addresses the connection then uses, so a name that resolves differently between a check
 * and the connection (DNS rebinding) cannot slip through.
 */
function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 0);
      const refused = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (refused) {
        return callback(
          new RefusedAddressError(`${hostname} resolves to ${refused.address}, a private address`),
          '',
          0,
        );
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/**
 * POSTs a JSON body; resolves with the status code (any) as soon as the answer's headers arrive, rejects
 * when none came within WEBHOOK_TIMEOUT_MS from the start (resolving, connecting, sending and the
 * headers all count: a receiver that trickles bytes cannot hold a worker's slot). The body is never
 * read: only the status is recorded, and the connection is closed at once.
 */
export function postJson(
  target: URL,
  body: string,
  headers: Record<string, string>,
  allowPrivate: boolean,
  signal: AbortSignal,
): Promise<number> {
  const literal = literalAddress(target);
  if (literal && !allowPrivate && !isPublicAddress(literal)) {
    return Promise.reject(new RefusedAddressError(`${literal} is a private address`));
  }
  return new Promise((resolve, reject) => {
    const request = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'user-agent': 'Berth-Webhooks',
      },
      lookup: guardedLookup(allowPrivate),
      // Never a kept-alive socket: the connection ends with the answer's headers.
      agent: false,
      signal,
    });
    const deadline = setTimeout(
      () => request.destroy(new Error(`no answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`)),
      WEBHOOK_TIMEOUT_MS,
    );
    request.on('close', () => clearTimeout(deadline));
    request.on('error', reject);
    request.on('response', (response) => {
      resolve(response.statusCode ?? 0);
      response.destroy();
    });
    request.end(body);
  });
}

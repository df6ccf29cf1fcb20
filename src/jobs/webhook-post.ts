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

/** POSTs a JSON body; resolves with the status code (any), rejects when no answer came. */
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
      timeout: WEBHOOK_TIMEOUT_MS,
      signal,
    });
    request.on('timeout', () =>
      request.destroy(new Error(`no answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`)),
    );
    request.on('error', reject);
    request.on('response', (response) => {
      // The body is not read: only the status counts. Draining it frees the socket.
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
      response.on('error', reject);
    });
    request.end(body);
  });
}

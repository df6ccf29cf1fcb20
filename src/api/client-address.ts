import type { FastifyRequest } from 'fastify';

/**
 * The address of the client that sent the request: the socket's peer, or, when that peer is one of the
 * proxies BERTH_TRUST_PROXY names, the last address in X-Forwarded-For that no trusted proxy added
 * (buildApp hands the list to Fastify's `trustProxy`, proxy-addr's rules). Failed-authentication limits,
 * audit entries and request logs all read it here, so they cannot disagree about who the client is.
 */
export function clientAddress(request: FastifyRequest): string {
  // Undefined only once the socket is gone (the client hung up): such a request still counts somewhere.
  return request.ip ?? 'unknown';
}

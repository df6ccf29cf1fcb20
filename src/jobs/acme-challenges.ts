/**
 * Answering the CA's challenges (RFC 8555 §8), one authorization at a time:
 *
 * - `http-01`: the key authorization is stored; any process's ingress serves it on port 80 under
 *   /.well-known/acme-challenge/<token>.
 * - `tls-alpn-01` (RFC 8737): a self-signed certificate carrying the key authorization is stored; any
 *   process's ingress presents it on its HTTPS port to a handshake for the name that offers only the
 *   `acme-tls/1` protocol (the CA's), and never to anyone else.
 * - `dns-01`: a TXT record `_acme-challenge.<name>` is written to the zone's primary by RFC 2136 UPDATE
 *   with TSIG (BERTH_ACME_DNS_*), and deleted once the CA has looked (valid or not). Wildcards need it.
 * @module
 */
import type { Authorization, Client } from 'acme-client';
import type { AcmeChallenge, Config } from '../config.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { deleteChallenge, findAlpnChallenge, putChallenge } from '../store/repositories/certificates.ts';
import { updateTxt } from './rfc2136.ts';

export type ChallengeType = AcmeChallenge | 'dns-01';
export type AcmeModule = typeof import('acme-client');

/** The CA looked and found the answer wrong or unreachable: its reason, and what to check. */
export class ChallengeFailed extends Error {
  readonly type: ChallengeType;
  readonly reason: string;

  constructor(type: ChallengeType, reason: string) {
    super(reason);
    this.type = type;
    this.reason = reason;
  }

  describe(name: string, config: Config): string {
    const what = `The CA could not validate ${name} over ${this.type.toUpperCase()}: ${this.reason}.`;
    const dns = config.acme?.dns;
    switch (this.type) {
      case 'http-01':
        return `${what} Check that ${name} resolves to the ingress, that port 80 reaches it from the internet, and that no CAA record forbids the CA.`;
      case 'tls-alpn-01':
        return `${what} Check that ${name} resolves to the ingress, that port 443 reaches BERTH_INGRESS_HTTPS_PORT from the internet with no TLS-terminating proxy in between, and that no CAA record forbids the CA.`;
      case 'dns-01':
        return `${what} Check that ${dns?.zone ?? 'BERTH_ACME_DNS_ZONE'} is delegated to the server Berth updates (${dns ? `${dns.server.host}:${dns.server.port}` : 'BERTH_ACME_DNS_SERVER'}) or its secondaries are in step, and that no CAA record forbids the CA.`;
    }
  }
}

/** Where a dns-01 answer lives: the name without its wildcard label. */
const txtName = (authz: Authorization) => `_acme-challenge.${authz.identifier.value.replace(/^\*\./, '')}`;

/**
 * Answers `authz`'s challenge of `type`, has the CA validate it, and takes the answer down again.
 * Rejects with ChallengeFailed when the CA finds it wrong.
 */
export async function validateAuthorization(
  deps: Pick<Deps, 'store' | 'secretBox' | 'config' | 'logger'>,
  acme: AcmeModule,
  client: Client,
  authz: Authorization,
  type: ChallengeType,
  signal: AbortSignal,
): Promise<void> {
  const { db } = deps.store;
  const name = authz.identifier.value;
  const challenge = authz.challenges.find((c) => c.type === type);
  if (!challenge)
    throw new Error(`the CA offers no ${type} challenge for ${authz.wildcard ? '*.' : ''}${name}`);
  const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
  const dns = deps.config.acme?.dns;
  let takeDown: () => Promise<void>;
  if (type === 'dns-01') {
    if (!dns) throw new Error('DNS-01 needs BERTH_ACME_DNS_SERVER and the other BERTH_ACME_DNS_* settings');
    const record = { name: txtName(authz), value: keyAuthorization };
    await updateTxt(dns, [{ action: 'add', ...record }]);
    takeDown = () => updateTxt(dns, [{ action: 'delete', ...record }]);
  } else if (type === 'tls-alpn-01') {
    const key = await acme.crypto.createPrivateEcdsaKey();
    const [, certificate] = await acme.crypto.createAlpnCertificate(authz, keyAuthorization, key);
    await putChallenge(db, {
      token: challenge.token,
      keyAuthorization,
      name,
      type,
      alpn: { certificate: certificate.toString(), key: deps.secretBox.seal(key.toString()) },
    });
    takeDown = () => deleteChallenge(db, challenge.token);
  } else {
    await putChallenge(db, { token: challenge.token, keyAuthorization, name, type });
    takeDown = () => deleteChallenge(db, challenge.token);
  }
  try {
    signal.throwIfAborted();
    if (challenge.status === 'pending') await client.completeChallenge(challenge);
    await client.waitForValidStatus(challenge).catch((error: Error) => {
      throw new ChallengeFailed(type, error.message);
    });
  } finally {
    // The CA has looked (or the run is ending): the answer has no use left. A record left behind by a
    // killed run is written again, and taken down, by the run that resumes the order.
    await takeDown().catch((err: Error) =>
      deps.logger.warn({ err, name, type }, 'taking an ACME challenge answer down failed'),
    );
  }
}

/** What the ingress presents to the CA's `acme-tls/1` handshake for `name`, or null. */
export async function alpnChallengeCertificate(
  deps: Pick<Deps, 'store' | 'secretBox'>,
  name: string,
): Promise<{ cert: string; key: string } | null> {
  const row = await findAlpnChallenge(deps.store.db, name);
  return row ? { cert: row.alpn_certificate, key: deps.secretBox.open(row.alpn_key) } : null;
}

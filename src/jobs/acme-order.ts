/**
 * One ACME order (RFC 8555, through `acme-client`) against BERTH_ACME_DIRECTORY_URL, for any set of
 * names and any challenge type, resumed where a previous run left it: the order's URL and its key are
 * stored (by the caller's `save`) before any challenge is answered, so a run that dies mid-order
 * (SIGKILL) leaves the order to the next run, which finishes it instead of ordering again.
 * @module
 */
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import tls from 'node:tls';
import { type Config, ConfigError } from '../config.ts';
import type { Deps } from '../domain/usecases/context.ts';
import { acmeAccountKey } from '../store/repositories/certificates.ts';
import {
  type AcmeModule,
  ChallengeFailed,
  type ChallengeType,
  validateAuthorization,
} from './acme-challenges.ts';
import { lostOrder } from './acme-orders.ts';

/** The PEM of BERTH_ACME_CA_FILE, checked at start: a ConfigError naming the setting when it is not one. */
export function readAcmeCa(acme: Config['acme']): string | undefined {
  if (!acme?.caFile) return undefined;
  let pem: string;
  try {
    pem = fs.readFileSync(acme.caFile, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`BERTH_ACME_CA_FILE cannot be read (${acme.caFile}: ${reason})`);
  }
  try {
    new X509Certificate(pem);
  } catch {
    throw new ConfigError(`BERTH_ACME_CA_FILE holds no PEM certificate (${acme.caFile})`);
  }
  return pem;
}

let acmeModule: Promise<AcmeModule> | undefined;

/**
 * acme-client, loaded when first used (it brings axios and node-forge), with its HTTP client set up once:
 * a deadline on every request (it has none by default) and BERTH_ACME_CA_FILE trusted besides the system's roots.
 */
export function loadAcme(config: Config): Promise<AcmeModule> {
  // A CommonJS module: its exports are the default export's members.
  acmeModule ??= import('acme-client').then((loaded) => {
    const acme = (loaded as unknown as { default: AcmeModule }).default;
    const ca = readAcmeCa(config.acme);
    acme.axios.defaults.timeout = 30_000;
    if (ca) acme.axios.defaults.httpsAgent = new https.Agent({ ca: [...tls.rootCertificates, ca] });
    return acme;
  });
  return acmeModule;
}

/** An order's subject, as its table stores it. */
export interface Orderable {
  /** The certificate's names; the first is its subject. */
  names: string[];
  order_url: string | null;
  /** Sealed: the key of the order in flight. */
  order_key: string | null;
  /** Stores the order in flight (null: none). */
  save(patch: { order_url: string | null; order_key?: string }): Promise<unknown>;
}

/** The CA's reason, and what to look at. */
export function describeOrderError(error: unknown, name: string, config: Config): string {
  if (error instanceof ChallengeFailed) return error.describe(name, config);
  const message = error instanceof Error ? error.message : String(error);
  return `Ordering the certificate for ${name} from ${config.acme?.directoryUrl ?? 'the ACME directory'} failed: ${message}`;
}

/** One order, resumed where a previous run left it: the certificate's PEM chain and its key. */
export async function order(
  deps: Deps,
  subject: Orderable,
  challenge: ChallengeType,
  signal: AbortSignal,
): Promise<{ pem: string; keyPem: string }> {
  const { db } = deps.store;
  const box = deps.secretBox;
  const settings = deps.config.acme as NonNullable<Config['acme']>;
  const acme = await loadAcme(deps.config);
  const newAccountKey = (await acme.crypto.createPrivateEcdsaKey()).toString();
  const accountKey = box.open(await acmeAccountKey(db, settings.directoryUrl, () => box.seal(newAccountKey)));
  const client = new acme.Client({
    directoryUrl: settings.directoryUrl,
    accountKey,
    backoffAttempts: 15,
    backoffMin: 500,
    backoffMax: 5_000,
  });
  // The same key finds the same account: asking again is how every process learns its URL.
  const account = await client.createAccount({
    termsOfServiceAgreed: true,
    ...(settings.email && { contact: [`mailto:${settings.email}`] }),
  });
  signal.throwIfAborted();

  let current: Awaited<ReturnType<typeof client.getOrder>> | null = null;
  let keyPem = subject.order_key ? box.open(subject.order_key) : '';
  if (subject.order_url && keyPem) {
    current = await client
      .getOrder({ url: subject.order_url } as Parameters<typeof client.getOrder>[0])
      .catch(() => null);
    if (current?.status === 'invalid') current = null;
  }
  if (!current && keyPem && !subject.order_url && subject.names.length === 1) {
    // A key with no URL: the run before died inside newOrder, maybe after the CA made the order.
    current = await lostOrder(client, subject.names[0] as string, account.orders);
    if (current) await subject.save({ order_url: current.url });
  }
  if (!current) {
    // The key first, then the order's URL the moment the CA gives it: a run that dies after this resumes it.
    keyPem = (await acme.crypto.createPrivateEcdsaKey()).toString();
    await subject.save({ order_key: box.seal(keyPem), order_url: null });
    current = await client.createOrder({
      identifiers: subject.names.map((value) => ({ type: 'dns', value })),
    });
    await subject.save({ order_url: current.url });
  }
  signal.throwIfAborted();

  if (current.status === 'pending') {
    for (const authz of await client.getAuthorizations(current)) {
      if (authz.status === 'valid') continue;
      await validateAuthorization(deps, acme, client, authz, challenge, signal);
      signal.throwIfAborted();
    }
  }
  if (current.status === 'pending' || current.status === 'ready') {
    const [commonName, ...others] = subject.names as [string, ...string[]];
    const [, csr] = await acme.crypto.createCsr({ commonName, altNames: [commonName, ...others] }, keyPem);
    current = await client.finalizeOrder(current, csr);
  }
  const url = current.url;
  const valid = await client.waitForValidStatus(current);
  const pem = await client.getCertificate({ ...valid, url });
  return { pem, keyPem };
}

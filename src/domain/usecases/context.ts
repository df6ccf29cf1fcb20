import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { DnsLookup } from '../../dns.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import type { Provider } from '../../providers/provider.ts';
import type { Store } from '../../store/database.ts';
import type { KeyClaim } from '../../store/repositories/idempotency-keys.ts';
import type { SecretBox } from '../../store/secret-box.ts';

/** What every use case may reach. Built once by the process entry and handed to buildApp and the worker. */
export interface Deps {
  store: Store;
  provider: Provider;
  dns: DnsLookup;
  secretBox: SecretBox;
  config: Config;
  logger: Logger;
  /** This process's own metrics (docs/metrics.md). */
  metrics: Metrics;
}

/**
 * The request a use case serves: its id and client address (written in the audit entry) and, when it sent an
 * Idempotency-Key, its claim on the key, confirmed in the transaction that does the work.
 */
export interface Call {
  requestId: string;
  /** Who sent the request (api/client-address.ts); absent when none did (the git poller). */
  clientAddress?: string | undefined;
  idempotency?: KeyClaim | undefined;
}

/**
 * Who is acting: an API token of an account (actor `API Token`), the operator through the admin API, or
 * a git host's webhook (named; its request id is the delivery id).
 */
export interface Actor extends Call {
  accountId: string;
  tokenId: string | null;
  /** Who the audit log names when it is neither a token nor the operator (`GitHub push`). */
  name?: string;
  /** The person behind the token (a token a member made); absent or null for operator tokens. */
  userId?: string | null;
  userEmail?: string | null;
  /** The token's name, when a person named it. */
  tokenName?: string | null;
  /** The request's User-Agent header, cut to 400 characters. */
  userAgent?: string | undefined;
}

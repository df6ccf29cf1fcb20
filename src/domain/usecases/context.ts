import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { DnsLookup } from '../../dns.ts';
import type { Provider } from '../../providers/provider.ts';
import type { Store } from '../../store/database.ts';
import type { SecretBox } from '../../store/secret-box.ts';

/** What every use case may reach. Built once by the process entry and handed to buildApp and the worker. */
export interface Deps {
  store: Store;
  provider: Provider;
  dns: DnsLookup;
  secretBox: SecretBox;
  config: Config;
  logger: Logger;
}

/** Who is acting: an API token of an account (actor `API Token`), or the operator through the admin API. */
export interface Actor {
  accountId: string;
  tokenId: string | null;
  requestId: string;
}

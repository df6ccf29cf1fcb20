import { Resolver } from 'node:dns/promises';
import type { DnsRecordSpec } from './domain/custom-domain-rules.ts';

/**
 * Looks records up through BERTH_DNS_SERVERS (`host:port,...`) or the system's resolver, with Node's
 * resolver (c-ares). Answers only what it finds: an empty list when the name has no such record.
 */
export class DnsLookup {
  private readonly resolver: Resolver;

  constructor(servers: string[]) {
    // Two tries of two seconds: a verify call answers within a few seconds even when DNS does not.
    this.resolver = new Resolver({ timeout: 2000, tries: 2 });
    if (servers.length > 0) this.resolver.setServers(servers);
  }

  async find(record: DnsRecordSpec): Promise<string[]> {
    try {
      return record.record_type === 'A'
        ? await this.resolver.resolve4(record.record_name)
        : await this.resolver.resolveCname(record.record_name);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA' || code === 'ENONAME') return [];
      throw new DnsUnavailableError(
        `DNS lookup of ${record.record_name} failed (${code ?? 'unknown error'})`,
      );
    }
  }
}

export class DnsUnavailableError extends Error {}

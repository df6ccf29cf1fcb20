import type { Command } from 'commander';
import { type paths, unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { CliError, EXIT } from './errors.ts';
import { type Column, stateText } from './output.ts';
import type { Session } from './session.ts';

type CustomDomain =
  paths['/v1/environments/{envId}/services/{serviceId}/custom-domains']['post']['responses'][200]['content']['application/json']['data']['custom_domain'];
type DnsRecord = CustomDomain['dns_records'][number];

const DOMAIN_COLUMNS: Column<CustomDomain>[] = [
  { header: 'DOMAIN', value: (d) => d.domain },
  { header: 'ID', value: (d) => d.id },
  { header: 'STATE', value: (d) => stateText(d.state) },
  { header: 'ORIGIN', value: (d) => d.origin },
];

const RECORD_COLUMNS: Column<DnsRecord>[] = [
  { header: 'TYPE', value: (r) => r.record_type },
  { header: 'NAME', value: (r) => r.record_name },
  { header: 'VALUE', value: (r) => r.record_value },
  { header: 'PURPOSE', value: (r) => r.purpose },
];

/** The service's domains: the active one, then the pending one (the API keeps at most these two). */
async function domainsOf(session: Session, envId: string, serviceId: string) {
  const data = unwrap(
    await session.api.GET('/v1/environments/{envId}/services/{serviceId}/custom-domains', {
      params: { path: { envId, serviceId } },
    }),
  );
  const { active_domain: active, pending_domain: pending } = data.custom_domain;
  return { data, domains: [active, pending].filter((d): d is CustomDomain => d !== null) };
}

/** A domain of the service, by name or id. */
async function domainOf(session: Session, envId: string, serviceId: string, reference: string) {
  const { domains } = await domainsOf(session, envId, serviceId);
  const found = domains.find((d) => d.id === reference || d.domain === reference.toLowerCase());
  if (!found) throw new CliError(`the service has no custom domain "${reference}"`, EXIT.notFound);
  return found;
}

/** The domain, then (as a table) the DNS records to create; `{custom_domain}` as JSON or YAML. */
function showDomain(session: Session, domain: CustomDomain) {
  if (session.out.format !== 'table') return session.out.item(domain, undefined, { custom_domain: domain });
  session.out.item(domain, ['domain', 'id', 'state', 'origin']);
  session.out.notice('\nDNS records to create:');
  session.out.list(domain.dns_records, RECORD_COLUMNS);
}

export function domainCommands(program: Command): void {
  const domains = withExamples(
    program.command('domains').description("a service's custom domains and the DNS records they need"),
    'domains ls "hello web"',
  );
  withExamples(
    common(
      domains.command('add <service> <domain>').description('add a domain; prints the DNS records to create'),
    ),
    'domains add "hello web" app.example.com',
  ).action(
    withSession<[string, string]>(async (session, [reference, name]) => {
      const { env, service } = await session.service(reference);
      const { custom_domain: domain } = unwrap(
        await session.api.POST('/v1/environments/{envId}/services/{serviceId}/custom-domains', {
          params: { path: { envId: env.id, serviceId: service.id } },
          body: { domain: name },
        }),
      );
      showDomain(session, domain);
      session.out.notice(`\nThen: berth domains verify "${service.name}" ${domain.domain}`);
    }),
  );
  withExamples(
    common(domains.command('ls <service>').description("the service's domains and their DNS records")),
    'domains ls "hello web"',
  ).action(
    withSession(async (session, [reference = '']) => {
      const { env, service } = await session.service(reference);
      const { data, domains } = await domainsOf(session, env.id, service.id);
      if (session.out.format !== 'table') return session.out.list(domains, DOMAIN_COLUMNS, data);
      session.out.list(domains, DOMAIN_COLUMNS);
      for (const domain of domains.filter((d) => d.state === 'unverified')) {
        session.out.notice(`\nDNS records for ${domain.domain}:`);
        session.out.list(domain.dns_records, RECORD_COLUMNS);
      }
    }),
  );
  withExamples(
    common(
      domains.command('verify <service> <domain>').description('check the DNS records and cut traffic over'),
    ),
    'domains verify "hello web" app.example.com',
  ).action(
    withSession<[string, string]>(async (session, [reference, name]) => {
      const { env, service } = await session.service(reference);
      const domain = await domainOf(session, env.id, service.id, name);
      const { custom_domain: verified } = unwrap(
        await session.api.POST(
          '/v1/environments/{envId}/services/{serviceId}/custom-domains/{customDomainId}/verify',
          { params: { path: { envId: env.id, serviceId: service.id, customDomainId: domain.id } } },
        ),
      );
      session.out.item(verified, ['domain', 'id', 'state', 'origin'], { custom_domain: verified });
    }),
  );
}

import { api, unwrap } from '../api.ts';
import { DataTable } from '../data-table.tsx';
import { readyText, runStatusLabel, ServiceState } from '../service-status.tsx';
import { CopyButton, Empty, ErrorBox, Loading, Page, Pager, StateBadge, useLoad, usePages } from '../ui.tsx';

const PAGE_SIZE = 20;
/** States, run status and ready replicas change by themselves: read again this often. */
const REFRESH_MS = 5000;

export function EnvironmentPage(props: { envId: string }) {
  const { envId } = props;
  const env = useLoad(
    async () =>
      unwrap(await api().GET('/v1/environments/{envId}', { params: { path: { envId } } })).environment,
    [envId],
  );
  return (
    <Page
      title={env.data ? `Environment ${env.data.name}` : 'Environment'}
      actions={
        <>
          <a class="button" href={`#/envs/${envId}/secrets`}>
            Environment secrets
          </a>
          <a class="button primary" href={`#/envs/${envId}/services/new`}>
            New service
          </a>
        </>
      }
    >
      {env.error ? (
        <ErrorBox error={env.error} onRetry={env.reload} />
      ) : !env.data ? (
        <Loading what="the environment" />
      ) : (
        <dl class="facts">
          <dt>State</dt>
          <dd>
            <StateBadge state={env.data.state} />
          </dd>
          <dt>Cloud</dt>
          <dd>
            {env.data.cloud} {env.data.region}
          </dd>
          <dt>Ingress host</dt>
          <dd>
            <code>{env.data.ingress_host}</code>{' '}
            <CopyButton text={env.data.ingress_host} label="ingress host" />
          </dd>
          <dt>NAT addresses</dt>
          <dd>{env.data.public_nat_ips.length ? env.data.public_nat_ips.join(', ') : '—'}</dd>
          <dt>Role</dt>
          <dd>
            <code class="wrap">{env.data.svc_role_arn}</code>
          </dd>
        </dl>
      )}
      <ServiceList envId={envId} />
    </Page>
  );
}

function ServiceList(props: { envId: string }) {
  const { envId } = props;
  const pages = usePages();
  const { data, error, loading, reload } = useLoad(
    // One read: the list's items carry the observed run status and ready replicas.
    async () => {
      const page = unwrap(
        await api().GET('/v1/environments/{envId}/services', {
          params: {
            path: { envId },
            query: { limit: PAGE_SIZE, ...(pages.cursor && { cursor: pages.cursor }) },
          },
        }),
      );
      return { services: page.services, next: page.next_cursor };
    },
    [envId, pages.cursor],
    { refreshMs: REFRESH_MS },
  );
  return (
    <section aria-labelledby="services-title">
      <h2 id="services-title">Services</h2>
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="services" />
      ) : !data?.services.length ? (
        <Empty>
          No service here yet. <a href={`#/envs/${envId}/services/new`}>Create one</a>, or with the CLI:{' '}
          <code>berth services create -f service.yaml</code>.
        </Empty>
      ) : (
        <>
          <DataTable
            label="Services of this environment"
            rows={data.services}
            keyOf={(s) => s.id}
            columns={[
              { header: 'Name', cell: (s) => <a href={`#/envs/${envId}/services/${s.id}`}>{s.name}</a> },
              { header: 'State', cell: (s) => <ServiceState service={s} /> },
              { header: 'Ready', cell: readyText },
              { header: 'Run status', cell: (s) => runStatusLabel(s.run_status) },
              { header: 'Source', cell: (s) => `${s.source}${s.type ? ` · ${s.type}` : ''}` },
            ]}
          />
          <Pager page={pages.page} nextCursor={data.next} pages={pages} label="Services" />
        </>
      )}
    </section>
  );
}

import { api, unwrap } from '../api.ts';
import { DataTable } from '../data-table.tsx';
import { Empty, ErrorBox, Loading, Page, StateBadge, Time, useLoad } from '../ui.tsx';

export function Environments() {
  const { data, error, loading, reload } = useLoad(
    async () => unwrap(await api().GET('/v1/environments')).environments,
    [],
  );
  return (
    <Page title="Environments">
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="environments" />
      ) : !data?.length ? (
        <Empty>
          This account has no environment yet. An operator creates one with{' '}
          <code>berth admin environments create ACCOUNT NAME</code>.
        </Empty>
      ) : (
        <DataTable
          label="Environments of this account"
          rows={data}
          keyOf={(env) => env.id}
          columns={[
            { header: 'Name', cell: (env) => <a href={`#/envs/${env.id}`}>{env.name}</a> },
            { header: 'State', cell: (env) => <StateBadge state={env.state} /> },
            { header: 'Cloud', cell: (env) => `${env.cloud} ${env.region}` },
            { header: 'Created', cell: (env) => <Time at={env.created_at} /> },
          ]}
        />
      )}
    </Page>
  );
}

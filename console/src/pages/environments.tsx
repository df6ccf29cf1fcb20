import { api, unwrap } from '../api.ts';
import { Empty, ErrorBox, Loading, Page, StateBadge, TableWrap, Time, useLoad } from '../ui.tsx';

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
        <TableWrap label="Environments of this account">
          <table class="stack">
            <caption class="sr-only">Environments of this account</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Cloud</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {data.map((env) => (
                <tr key={env.id}>
                  <td data-label="Name">
                    <a href={`#/envs/${env.id}`}>{env.name}</a>
                  </td>
                  <td data-label="State">
                    <StateBadge state={env.state} />
                  </td>
                  <td data-label="Cloud">
                    {env.cloud} {env.region}
                  </td>
                  <td data-label="Created">
                    <Time at={env.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </Page>
  );
}

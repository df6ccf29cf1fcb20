import { api, unwrap } from '../api.ts';
import { Empty, ErrorBox, Loading, Page, Pager, TableWrap, Time, useLoad, usePages } from '../ui.tsx';

const PAGE_SIZE = 25;

export function AuditLog() {
  const pages = usePages();
  const { data, error, loading, reload } = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/audit-logs', {
          params: { query: { limit: PAGE_SIZE, ...(pages.cursor && { cursor: pages.cursor }) } },
        }),
      ),
    [pages.cursor],
  );
  return (
    <Page title="Audit log">
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="the audit log" />
      ) : !data?.audit_logs.length ? (
        <Empty>Nothing recorded yet: every change made through the API appears here.</Empty>
      ) : (
        <>
          <TableWrap label="Audit log, newest first">
            <table class="stack">
              <caption class="sr-only">Audit log, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Actor</th>
                  <th scope="col">Action</th>
                  <th scope="col">Resource</th>
                </tr>
              </thead>
              <tbody>
                {data.audit_logs.map((a) => (
                  <tr key={a.id}>
                    <td data-label="When">
                      <Time at={a.created_at} />
                    </td>
                    <td data-label="Actor">{a.actor}</td>
                    <td data-label="Action">
                      <code>{a.action}</code>
                    </td>
                    <td data-label="Resource">
                      {a.resource_type}
                      {a.resource_id && (
                        <>
                          {' '}
                          <code class="muted">{a.resource_id.slice(0, 8)}</code>
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <Pager page={pages.page} nextCursor={data.next_cursor} pages={pages} label="Audit log" />
        </>
      )}
    </Page>
  );
}

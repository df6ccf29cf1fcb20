import { api, unwrap } from '../api.ts';
import { DataTable } from '../data-table.tsx';
import { Empty, ErrorBox, Loading, Page, Pager, Time, useLoad, usePages } from '../ui.tsx';

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
          <DataTable
            label="Audit log, newest first"
            rows={data.audit_logs}
            keyOf={(a) => a.id}
            columns={[
              { header: 'When', cell: (a) => <Time at={a.created_at} /> },
              { header: 'Actor', cell: (a) => a.actor },
              { header: 'Action', cell: (a) => <code>{a.action}</code> },
              {
                header: 'Resource',
                cell: (a) => (
                  <>
                    {a.resource_type}
                    {a.resource_id && (
                      <>
                        {' '}
                        <code class="muted">{a.resource_id.slice(0, 8)}</code>
                      </>
                    )}
                  </>
                ),
              },
            ]}
          />
          <Pager page={pages.page} nextCursor={data.next_cursor} pages={pages} label="Audit log" />
        </>
      )}
    </Page>
  );
}

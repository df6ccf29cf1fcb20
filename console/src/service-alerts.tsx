import { api, unwrap } from './api.ts';
import { Empty, ErrorBox, Loading, Pager, TableWrap, Time, useLoad, usePages } from './ui.tsx';

const ALERTS_PAGE = 10;
/** Alerts open and resolve once a minute at most: read again this often. */
const REFRESH_MS = 15_000;

const RULE_LABELS: Record<string, string> = {
  crash_loop: 'Crash loop',
  deploy_failed: 'Deploy failed',
  memory_high: 'Memory high',
  error_rate_high: '5xx rate high',
  no_ready_replica: 'No ready replica',
};

/** A service's alerts, open and resolved, newest opened first (docs/metrics.md, "Alert rules"). */
export function ServiceAlerts(props: { envId: string; serviceId: string }) {
  const pages = usePages();
  const { data, error, loading, reload } = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/environments/{envId}/services/{serviceId}/alerts', {
          params: {
            path: props,
            query: { limit: ALERTS_PAGE, ...(pages.cursor && { cursor: pages.cursor }) },
          },
        }),
      ),
    [props.envId, props.serviceId, pages.cursor],
    { refreshMs: REFRESH_MS },
  );
  return (
    <section aria-labelledby="alerts-title">
      <h2 id="alerts-title">Alerts</h2>
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="alerts" />
      ) : !data?.alerts.length ? (
        <Empty>No alerts: none of its rules has tripped.</Empty>
      ) : (
        <>
          <TableWrap label="Alerts, newest first">
            <table class="stack">
              <caption class="sr-only">Alerts, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Rule</th>
                  <th scope="col">State</th>
                  <th scope="col">Opened</th>
                  <th scope="col">Resolved</th>
                  <th scope="col">Why</th>
                </tr>
              </thead>
              <tbody>
                {data.alerts.map((a) => (
                  <tr key={a.id}>
                    <td data-label="Rule">{RULE_LABELS[a.rule] ?? a.rule}</td>
                    <td data-label="State">
                      <span class={`badge ${a.state === 'open' ? 'bad' : 'good'}`}>{a.state}</span>
                    </td>
                    <td data-label="Opened">
                      <Time at={a.opened_at} />
                    </td>
                    <td data-label="Resolved">
                      <Time at={a.resolved_at} />
                    </td>
                    <td data-label="Why">{a.message}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <Pager page={pages.page} nextCursor={data.next_cursor} pages={pages} label="Alerts" />
        </>
      )}
    </section>
  );
}

import { api, messageOf, unwrap } from '../api.ts';
import { useServiceName } from '../service-name.ts';
import type { Dependency, DependencyBackup } from '../types.ts';
import { Empty, ErrorBox, Loading, Page, StateBadge, TableWrap, Time, useLoad, useSubmit } from '../ui.tsx';

/** How often the page reads again while a backup or restore may be running. */
const REFRESH_MS = 3_000;

/** The kinds that have backups (docs/operations.md, "Dependency backups"). */
const BACKED_UP = new Set(['rds.instances', 'elasticache.clusters']);

const sizeText = (bytes: number | null) =>
  bytes === null
    ? ''
    : bytes < 1_048_576
      ? `${Math.ceil(bytes / 1024)} KB`
      : `${(bytes / 1_048_576).toFixed(1)} MB`;

/** A service's ops.json dependencies as made, and the backups of its databases and caches. */
export function Dependencies(props: { envId: string; serviceId: string }) {
  const { envId, serviceId } = props;
  const { data, error, loading, reload } = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/environments/{envId}/services/{serviceId}/dependencies', {
          params: { path: { envId, serviceId } },
        }),
      ).dependencies,
    [envId, serviceId],
  );
  const serviceName = useServiceName(envId, serviceId);
  return (
    <Page title={serviceName ? `Dependencies of ${serviceName}` : 'Dependencies'}>
      <p class="crumbs">
        <a href={`#/envs/${envId}/services/${serviceId}`}>← {serviceName ?? 'Service'}</a>
      </p>
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="dependencies" />
      ) : !data?.length ? (
        <Empty>No dependencies: the service's ops.json declares none, or it has not been deployed yet.</Empty>
      ) : (
        data.map((d) => <DependencyCard key={`${d.kind}.${d.type}.${d.id}`} {...{ envId, serviceId, d }} />)
      )}
    </Page>
  );
}

function DependencyCard(props: { envId: string; serviceId: string; d: Dependency }) {
  const { d } = props;
  const headingId = `dependency-${d.kind}-${d.type}-${d.id}`.replace(/[^\w-]/g, '_');
  return (
    <section class="card" aria-labelledby={headingId}>
      <h2 id={headingId}>
        {d.kind} {d.type} {d.id} <StateBadge state={d.state} />
      </h2>
      {d.attributes.endpoint && (
        <p class="muted">
          <code>{d.attributes.endpoint}</code>
        </p>
      )}
      {d.error && <p class="field-error">{d.error}</p>}
      {BACKED_UP.has(`${d.kind}.${d.type}`) && (
        <Backups
          envId={props.envId}
          serviceId={props.serviceId}
          dependencyId={`${d.kind}.${d.type}.${d.id}`}
          label={d.id}
        />
      )}
    </section>
  );
}

function Backups(props: { envId: string; serviceId: string; dependencyId: string; label: string }) {
  const path = { envId: props.envId, serviceId: props.serviceId, dependencyId: props.dependencyId };
  const url = '/v1/environments/{envId}/services/{serviceId}/dependencies/{dependencyId}/backups';
  const backups = useLoad(
    async () => unwrap(await api().GET(url, { params: { path } })).backups,
    [props.dependencyId],
    { refreshMs: REFRESH_MS },
  );
  const create = useSubmit(
    async () => unwrap(await api().POST(url, { params: { path }, body: {} })),
    backups.reload,
  );
  return (
    <>
      <div class="form-actions">
        <button type="button" onClick={create.run} disabled={create.busy}>
          {create.busy ? 'Asking…' : `Back up ${props.label} now`}
        </button>
      </div>
      {create.error !== undefined && (
        <div class="error-box" role="alert">
          <p>{messageOf(create.error)}</p>
        </div>
      )}
      {backups.error ? (
        <ErrorBox error={backups.error} onRetry={backups.reload} />
      ) : !backups.data ? (
        <Loading what="backups" />
      ) : backups.data.length === 0 ? (
        <Empty>No backups yet.</Empty>
      ) : (
        <BackupTable label={`Backups of ${props.label}, newest first`} backups={backups.data} />
      )}
    </>
  );
}

function BackupTable(props: { label: string; backups: DependencyBackup[] }) {
  return (
    <TableWrap label={props.label}>
      <table class="stack">
        <caption class="sr-only">{props.label}</caption>
        <thead>
          <tr>
            <th scope="col">Taken</th>
            <th scope="col">State</th>
            <th scope="col">Trigger</th>
            <th scope="col">Size</th>
            <th scope="col">Latest restore</th>
          </tr>
        </thead>
        <tbody>
          {props.backups.map((b) => (
            <tr key={b.id}>
              <td data-label="Taken">
                <Time at={b.created_at} />
              </td>
              <td data-label="State">
                <StateBadge state={b.state} />
                {b.error && <span class="field-error"> {b.error}</span>}
              </td>
              <td data-label="Trigger">{b.trigger}</td>
              <td data-label="Size">{sizeText(b.size_bytes)}</td>
              <td data-label="Latest restore">
                {b.restore ? (
                  <>
                    <StateBadge state={b.restore.state} /> into{' '}
                    {b.restore.into === 'new' ? 'a copy' : 'the dependency'}
                    {b.restore.error && <span class="field-error"> {b.restore.error}</span>}
                  </>
                ) : (
                  'never'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableWrap>
  );
}

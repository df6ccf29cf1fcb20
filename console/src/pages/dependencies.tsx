import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, messageOf, unwrap } from '../api.ts';
import { useServiceName } from '../service-name.ts';
import type { Dependency, DependencyBackup } from '../types.ts';
import {
  Empty,
  ErrorBox,
  Loading,
  Page,
  StateBadge,
  TableWrap,
  Time,
  useItemSubmit,
  useLoad,
  useSubmit,
} from '../ui.tsx';

/** How often the page reads again while a backup or restore may be running. */
const REFRESH_MS = 3_000;

/** The kinds that have backups (docs/operations.md, "Dependency backups"). */
const BACKED_UP = new Set(['rds.instances', 'elasticache.clusters']);

/** Why a dependency in this state takes no backup now (the API refuses all but an available one). */
const NOT_BACKED_UP: Record<Dependency['state'], string> = {
  available: '',
  provisioning: 'is still being made',
  failed: 'failed',
  deleting: 'is being deleted',
};

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
        data.map((d) => (
          <DependencyCard
            key={`${d.kind}.${d.type}.${d.id}`}
            {...{ envId, serviceId, d }}
            serviceName={serviceName ?? 'its service'}
          />
        ))
      )}
    </Page>
  );
}

function DependencyCard(props: { envId: string; serviceId: string; d: Dependency; serviceName: string }) {
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
          state={d.state}
          serviceName={props.serviceName}
        />
      )}
    </section>
  );
}

/** A restore asked for and not yet sent: which backup, and the API's word when the dependency is in use. */
interface Confirming {
  backup: DependencyBackup;
  inUse: boolean;
}

/** The API refused a restore because a service uses the dependency: it wants `force`. */
const isInUse = (error: unknown) =>
  error instanceof ApiError && error.status === 409 && /in use by service/.test(error.message);

function Backups(props: {
  envId: string;
  serviceId: string;
  dependencyId: string;
  label: string;
  /** The dependency's state: only an available one can be backed up (else the API answers 409). */
  state: Dependency['state'];
  serviceName: string;
}) {
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
  const restoreUrl = `${url}/{backupId}/restore` as const;
  const restore = (backupId: string, body: { force?: boolean; into?: 'same' | 'new' }) =>
    api().POST(restoreUrl, { params: { path: { ...path, backupId } }, body });
  const [confirming, setConfirming] = useState<Confirming | null>(null);
  const canBackUp = props.state === 'available';
  const whyNotId = `why-no-backup-${props.dependencyId}`.replace(/[^\w-]/g, '_');
  // Into the dependency: asked without force first, so that the API says whether a service is in the way.
  const intoSame = useSubmit(async () => {
    if (!confirming) return;
    try {
      unwrap(await restore(confirming.backup.id, { force: confirming.inUse }));
      setConfirming(null);
    } catch (error) {
      if (!isInUse(error) || confirming.inUse) throw error;
      setConfirming({ ...confirming, inUse: true });
    }
  }, backups.reload);
  const intoNew = useItemSubmit(
    async (backupId) => unwrap(await restore(backupId, { into: 'new' })),
    backups.reload,
  );
  const ask = (backup: DependencyBackup) => {
    intoSame.reset();
    setConfirming({ backup, inUse: false });
  };
  return (
    <>
      <div class="form-actions">
        <button
          type="button"
          onClick={create.run}
          disabled={create.busy || !canBackUp}
          aria-describedby={canBackUp ? undefined : whyNotId}
        >
          {create.busy ? 'Asking…' : `Back up ${props.label} now`}
        </button>
        {!canBackUp && (
          <span class="muted" id={whyNotId}>
            {props.label} {NOT_BACKED_UP[props.state]}: it can be backed up once it is available.
          </span>
        )}
      </div>
      {create.error !== undefined && (
        <div class="error-box" role="alert">
          <p>{messageOf(create.error)}</p>
        </div>
      )}
      {intoNew.error !== undefined && (
        <div class="error-box" role="alert">
          <p>{messageOf(intoNew.error)}</p>
        </div>
      )}
      {backups.error ? (
        <ErrorBox error={backups.error} onRetry={backups.reload} />
      ) : !backups.data ? (
        <Loading what="backups" />
      ) : backups.data.length === 0 ? (
        <Empty>No backups yet.</Empty>
      ) : (
        <BackupTable
          label={`Backups of ${props.label}, newest first`}
          backups={backups.data}
          onRestore={ask}
          onCopy={(b) => intoNew.pick(b.id)}
          busy={intoSame.busy || intoNew.busy}
        />
      )}
      {confirming && (
        <ConfirmRestore
          label={props.label}
          serviceName={props.serviceName}
          confirming={confirming}
          busy={intoSame.busy}
          error={intoSame.error}
          onConfirm={intoSame.run}
          onCancel={() => setConfirming(null)}
        />
      )}
    </>
  );
}

/**
 * The confirmation a restore into the dependency needs (it replaces the data), and a second one when
 * the API answers that a service uses it: that service is then stopped for the restore's duration.
 */
function ConfirmRestore(props: {
  label: string;
  serviceName: string;
  confirming: Confirming;
  busy: boolean;
  error: unknown;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const { backup, inUse } = props.confirming;
  const headingId = `confirm-restore-${backup.id}`;
  const heading = useRef<HTMLHeadingElement>(null);
  // Focus goes to the question, asked anew when the API's answer changes it.
  useEffect(() => heading.current?.focus(), [inUse]);
  return (
    <section class="confirm" aria-labelledby={headingId}>
      <h3 id={headingId} ref={heading} tabIndex={-1}>
        Restore {props.label} from the backup taken <Time at={backup.created_at} />?
      </h3>
      {inUse ? (
        <p role="alert">
          {props.label} is in use by {props.serviceName}: restoring stops {props.serviceName} until the
          restore ends, then starts it again.
        </p>
      ) : (
        <p>Its data is replaced with the backup's, in place: what was written since the backup is lost.</p>
      )}
      {props.error !== undefined && (
        <div class="error-box" role="alert">
          <p>{messageOf(props.error)}</p>
        </div>
      )}
      <div class="form-actions">
        <button type="button" class="danger" onClick={props.onConfirm} disabled={props.busy}>
          {props.busy
            ? 'Asking…'
            : inUse
              ? `Stop ${props.serviceName} and restore`
              : `Restore ${props.label}`}
        </button>
        <button type="button" onClick={props.onCancel} disabled={props.busy}>
          Cancel
        </button>
      </div>
    </section>
  );
}

function BackupTable(props: {
  label: string;
  backups: DependencyBackup[];
  onRestore: (backup: DependencyBackup) => void;
  onCopy: (backup: DependencyBackup) => void;
  busy: boolean;
}) {
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
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.backups.map((b) => {
            const restoring = b.restore?.state === 'pending' || b.restore?.state === 'running';
            const copy =
              b.restore?.into === 'new' && b.restore.state === 'completed' ? b.restore.attributes : null;
            return (
              <tr key={b.id}>
                <td data-label="Taken" id={`taken-${b.id}`}>
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
                      {b.restore.stopped_services.length > 0 && (
                        <span class="muted">
                          {' '}
                          (its service {restoring ? 'is stopped until it ends' : 'was stopped meanwhile'})
                        </span>
                      )}
                      {copy?.endpoint && (
                        <>
                          {' '}
                          at <code>{copy.endpoint}</code>
                        </>
                      )}
                      {b.restore.error && <span class="field-error"> {b.restore.error}</span>}
                    </>
                  ) : (
                    'never'
                  )}
                </td>
                <td data-label="Actions">
                  {b.state === 'completed' && (
                    <span class="row-actions">
                      <button
                        type="button"
                        class="small"
                        disabled={props.busy || restoring}
                        onClick={() => props.onRestore(b)}
                        aria-describedby={`taken-${b.id}`}
                      >
                        Restore
                      </button>{' '}
                      <button
                        type="button"
                        class="small"
                        disabled={props.busy || restoring}
                        onClick={() => props.onCopy(b)}
                        aria-describedby={`taken-${b.id}`}
                      >
                        Restore into a copy
                      </button>
                    </span>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableWrap>
  );
}

import { useState } from 'preact/hooks';
import { api, unwrap } from '../api.ts';
import { DataTable } from '../data-table.tsx';
import { RestartOrRollBack } from '../deploy-controls.tsx';
import { FormErrors, inLabel } from '../form-errors.tsx';
import { navigate } from '../router.ts';
import { ServiceAlerts } from '../service-alerts.tsx';
import {
  apiValue,
  FORM_FIELDS,
  type FormValues,
  formValuesOf,
  isShown,
  ServiceFields,
  unplacedErrors,
} from '../service-form.tsx';
import { ServiceMetrics } from '../service-metrics.tsx';
import { readyText, runStatusLabel, ServiceState } from '../service-status.tsx';
import type { DeployBody, PatchServiceBody, Service } from '../types.ts';
import {
  Empty,
  ErrorBox,
  Loading,
  Page,
  Pager,
  StateBadge,
  TextField,
  Time,
  useLoad,
  usePages,
  useSubmit,
} from '../ui.tsx';

const DEPLOYMENTS_PAGE = 10;
/** The service's state and its deployments' change by themselves: read again this often. */
const REFRESH_MS = 5000;

export function ServicePage(props: { envId: string; serviceId: string }) {
  const { envId, serviceId } = props;
  const path = { envId, serviceId };
  const service = useLoad(
    async () =>
      unwrap(await api().GET('/v1/environments/{envId}/services/{serviceId}', { params: { path } })).service,
    [envId, serviceId],
    { refreshMs: REFRESH_MS },
  );
  const s = service.data;
  return (
    <Page
      title={s ? s.name : 'Service'}
      actions={
        <>
          <a class="button" href={`#/envs/${envId}/services/${serviceId}/secrets`}>
            Secrets
          </a>
          <a class="button" href={`#/envs/${envId}/services/${serviceId}/domains`}>
            Custom domains
          </a>
          <a class="button" href={`#/envs/${envId}/services/${serviceId}/dependencies`}>
            Dependencies
          </a>
        </>
      }
    >
      <p class="crumbs">
        <a href={`#/envs/${envId}`}>← Environment</a>
      </p>
      {service.error ? (
        <ErrorBox error={service.error} onRetry={service.reload} />
      ) : !s ? (
        <Loading what="the service" />
      ) : (
        <>
          <dl class="facts">
            <dt>State</dt>
            <dd>
              <ServiceState service={s} />
            </dd>
            <dt>Run status</dt>
            <dd>{runStatusLabel(s.run_status)}</dd>
            <dt>Ready replicas</dt>
            <dd>{readyText(s)}</dd>
            <dt>Source</dt>
            <dd>
              {s.source}
              {s.type && ` · ${s.type}`}
            </dd>
            <dt>Origin</dt>
            <dd>
              <code>{s.origin}</code>
            </dd>
          </dl>
          <DeployForm envId={envId} service={s} />
          <RestartOrRollBack envId={envId} service={s} />
          <Deployments envId={envId} serviceId={serviceId} />
          <ServiceMetrics envId={envId} serviceId={serviceId} />
          <ServiceAlerts envId={envId} serviceId={serviceId} />
          <Settings envId={envId} service={s} onSaved={service.reload} />
        </>
      )}
    </Page>
  );
}

/** The deploy target that fits the service's source (the API takes at most one). */
function targetOf(source: Service['source']) {
  switch (source) {
    case 'github':
    case 'gitlab':
      return { field: 'commit_id', label: 'Commit', hint: 'empty: the head of the branch' } as const;
    case 'docker_image':
      return { field: 'docker_image_tag', label: 'Image tag', hint: 'empty: latest' } as const;
    case 'helm_chart':
      return { field: 'helm_chart_version', label: 'Chart version', hint: 'empty: the latest' } as const;
  }
}

function DeployForm(props: { envId: string; service: Service }) {
  const target = targetOf(props.service.source);
  const [value, setValue] = useState('');
  const [note, setNote] = useState('');
  const deploy = useSubmit(
    async () => {
      const body: DeployBody = {
        ...(value.trim() && { [target.field]: value.trim() }),
        ...(note.trim() && { note: note.trim() }),
      };
      return unwrap(
        await api().POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
          params: { path: { envId: props.envId, serviceId: props.service.id } },
          body,
        }),
      );
    },
    // The other answer is preview mode's, which this form never asks for.
    (accepted) => 'deployment_id' in accepted && navigate(`/deployments/${accepted.deployment_id}`),
  );
  return (
    <section aria-labelledby="deploy-title">
      <h2 id="deploy-title">Deploy</h2>
      <form class="card" onSubmit={deploy.run} noValidate>
        <FormErrors
          error={deploy.error}
          unplaced={Object.entries(deploy.errors).filter(([f]) => f !== target.field && f !== 'note')}
        />
        <div class="grid-2">
          <TextField
            id="deploy-target"
            label={target.label}
            hint={target.hint}
            value={value}
            onInput={setValue}
            error={inLabel(deploy.errors[target.field], target.field, target.label)}
            attrs={{ spellcheck: false }}
          />
          <TextField
            id="deploy-note"
            label="Note"
            value={note}
            onInput={setNote}
            error={inLabel(deploy.errors.note, 'note', 'Note')}
          />
        </div>
        <div class="form-actions">
          <button type="submit" class="primary" disabled={deploy.busy}>
            {deploy.busy ? 'Deploying…' : 'Deploy'}
          </button>
        </div>
      </form>
    </section>
  );
}

export function targetText(d: {
  git_commit_ref: string;
  docker_image_tag: string;
  helm_chart_version: string;
}): string {
  return d.docker_image_tag || d.helm_chart_version || d.git_commit_ref.slice(0, 12) || '—';
}

function Deployments(props: { envId: string; serviceId: string }) {
  const pages = usePages();
  const { data, error, loading, reload } = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/environments/{envId}/services/{serviceId}/deployments', {
          params: {
            path: props,
            query: { limit: DEPLOYMENTS_PAGE, ...(pages.cursor && { cursor: pages.cursor }) },
          },
        }),
      ),
    [props.envId, props.serviceId, pages.cursor],
    { refreshMs: REFRESH_MS },
  );
  return (
    <section aria-labelledby="deployments-title">
      <h2 id="deployments-title">Deployments</h2>
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="deployments" />
      ) : !data?.deployments.length ? (
        <Empty>Not deployed yet: deploy it with the form above.</Empty>
      ) : (
        <>
          <DataTable
            label="Deployments, newest first"
            rows={data.deployments}
            keyOf={(d) => d.id}
            columns={[
              {
                header: 'Started',
                cell: (d) => (
                  <a
                    href={`#/deployments/${d.id}`}
                    aria-label={`Deployment of ${new Date(d.created_at).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' })}`}
                  >
                    <Time at={d.created_at} />
                  </a>
                ),
              },
              { header: 'State', cell: (d) => <StateBadge state={d.state} /> },
              { header: 'Target', cell: (d) => <code>{targetText(d)}</code> },
              { header: 'Note', cell: (d) => d.note || <span class="muted">—</span> },
            ]}
          />
          <Pager page={pages.page} nextCursor={data.next_cursor} pages={pages} label="Deployments" />
        </>
      )}
    </section>
  );
}

function Settings(props: { envId: string; service: Service; onSaved: () => void }) {
  const initial = formValuesOf(props.service as unknown as Record<string, unknown>);
  const [values, setValues] = useState<FormValues>(initial);
  const [saved, setSaved] = useState(false);
  const onChange = (field: string, value: string | boolean) => {
    setSaved(false);
    setValues((v) => ({ ...v, [field]: value }));
  };
  const save = useSubmit(
    async () => {
      // A PATCH names only what changed.
      const body: Record<string, unknown> = {};
      if (values.name !== initial.name) body.name = values.name;
      if (values.source !== initial.source) body.source = values.source;
      if (values.type !== initial.type) body.type = values.type || null;
      for (const f of FORM_FIELDS) {
        if (!isShown(f, values) || values[f.field] === initial[f.field]) continue;
        body[f.field] = apiValue(f, values[f.field] ?? '');
      }
      if (!Object.keys(body).length) return;
      unwrap(
        await api().PATCH('/v1/environments/{envId}/services/{serviceId}', {
          params: { path: { envId: props.envId, serviceId: props.service.id } },
          body: body as PatchServiceBody,
        }),
      );
      props.onSaved();
    },
    () => setSaved(true),
  );
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <form class="card" onSubmit={save.run} noValidate>
        <FormErrors error={save.error} unplaced={unplacedErrors(save.errors, values)} />
        <ServiceFields values={values} errors={save.errors} onChange={onChange} idPrefix="settings" />
        <div class="form-actions">
          <button type="submit" class="primary" disabled={save.busy}>
            {save.busy ? 'Saving…' : 'Save settings'}
          </button>
          {saved && (
            <span class="notice" role="status">
              Settings saved.
            </span>
          )}
        </div>
      </form>
    </section>
  );
}

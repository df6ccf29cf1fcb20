import { useState } from 'preact/hooks';
import { ApiError, api, messageOf, unwrap } from '../api.ts';
import { inLabel } from '../form-errors.tsx';
import { useServiceName } from '../service-name.ts';
import type { CustomDomain } from '../types.ts';
import {
  CopyButton,
  Empty,
  ErrorBox,
  Loading,
  Page,
  StateBadge,
  TextField,
  Time,
  useLoad,
  useSubmit,
} from '../ui.tsx';

export function Domains(props: { envId: string; serviceId: string }) {
  const { envId, serviceId } = props;
  const { data, error, loading, reload } = useLoad(
    async () =>
      unwrap(
        await api().GET('/v1/environments/{envId}/services/{serviceId}/custom-domains', {
          params: { path: { envId, serviceId } },
        }),
      ).custom_domain,
    [envId, serviceId],
  );
  const serviceName = useServiceName(envId, serviceId);
  return (
    <Page title={serviceName ? `Custom domains of ${serviceName}` : 'Custom domains'}>
      <p class="crumbs">
        <a href={`#/envs/${envId}/services/${serviceId}`}>← {serviceName ?? 'Service'}</a>
      </p>
      <AddDomain envId={envId} serviceId={serviceId} onAdded={reload} />
      {error ? (
        <ErrorBox error={error} onRetry={reload} />
      ) : loading && !data ? (
        <Loading what="custom domains" />
      ) : !data?.active_domain && !data?.pending_domain ? (
        <Empty>No custom domain yet: add one above, then create the DNS records it lists.</Empty>
      ) : (
        <>
          {data.active_domain && (
            <DomainCard title="Serving" domain={data.active_domain} envId={envId} onChange={reload} />
          )}
          {data.pending_domain && (
            <DomainCard title="Pending" domain={data.pending_domain} envId={envId} onChange={reload} />
          )}
        </>
      )}
    </Page>
  );
}

function AddDomain(props: { envId: string; serviceId: string; onAdded: () => void }) {
  const [domain, setDomain] = useState('');
  const add = useSubmit(
    async () =>
      unwrap(
        await api().POST('/v1/environments/{envId}/services/{serviceId}/custom-domains', {
          params: { path: { envId: props.envId, serviceId: props.serviceId } },
          body: { domain: domain.trim() },
        }),
      ),
    () => {
      setDomain('');
      props.onAdded();
    },
  );
  return (
    <form class="card" onSubmit={add.run} noValidate>
      <TextField
        id="domain"
        label="Add a domain"
        hint="e.g. app.example.com; you then create two DNS records and verify"
        value={domain}
        onInput={setDomain}
        error={
          inLabel(add.errors.domain, 'domain', 'Domain') ?? (add.error ? messageOf(add.error) : undefined)
        }
        attrs={{ spellcheck: false, autoComplete: 'off' }}
      />
      <div class="form-actions">
        <button type="submit" class="primary" disabled={add.busy}>
          {add.busy ? 'Adding…' : 'Add domain'}
        </button>
      </div>
    </form>
  );
}

function DomainCard(props: { title: string; domain: CustomDomain; envId: string; onChange: () => void }) {
  const d = props.domain;
  const verify = useSubmit(
    async () =>
      unwrap(
        await api().POST(
          '/v1/environments/{envId}/services/{serviceId}/custom-domains/{customDomainId}/verify',
          {
            params: { path: { envId: props.envId, serviceId: d.service_id, customDomainId: d.id } },
          },
        ),
      ),
    props.onChange,
  );
  // DOMAIN_VERIFICATION_FAILED names each failing record by its record_name.
  const failures = verify.errors;
  const error = verify.error;
  const verificationFailed =
    error instanceof ApiError && error.body.error_code === 'DOMAIN_VERIFICATION_FAILED';
  return (
    <section class="card" aria-labelledby={`domain-${d.id}`}>
      <h2 id={`domain-${d.id}`}>
        {props.title}: {d.domain} <StateBadge state={d.state} />
      </h2>
      {error !== undefined && (
        <div class="error-box" role="alert">
          <p>
            {verificationFailed
              ? 'Not verified yet: the records marked below are missing or wrong. DNS changes can take a while to be seen; try again later.'
              : messageOf(error)}
          </p>
        </div>
      )}
      {d.certificate && <CertificateFacts id={d.id} certificate={d.certificate} />}
      <p class="muted">Create these records at your DNS provider, then verify.</p>
      <div class="records">
        {d.dns_records.map((r) => {
          const failure = failures[r.record_name];
          const purpose = r.purpose === 'verify_acm' ? 'certificate validation' : 'traffic';
          return (
            <div class={`record${failure ? ' failing' : ''}`} key={`${r.purpose}${r.record_name}`}>
              <strong>
                {r.record_type} · {purpose}
              </strong>
              <div class="value">
                <span class="muted">Name</span> <code>{r.record_name}</code>
                <CopyButton text={r.record_name} label={`${purpose} record name`} />
              </div>
              <div class="value">
                <span class="muted">Value</span> <code>{r.record_value}</code>
                <CopyButton text={r.record_value} label={`${purpose} record value`} />
              </div>
              {failure && <p class="field-error">{failure}</p>}
            </div>
          );
        })}
      </div>
      {d.state === 'unverified' && (
        <div class="form-actions">
          <button type="button" class="primary" onClick={() => verify.run()} disabled={verify.busy}>
            {verify.busy ? 'Verifying…' : 'Verify'}
          </button>
        </div>
      )}
    </section>
  );
}

const CERTIFICATE_STATUS: Record<string, string> = {
  pending: 'Ordered: served over HTTP until it is issued.',
  issued: 'Served over HTTPS; plain HTTP redirects there.',
  renewing: 'Being renewed: the current certificate keeps serving meanwhile.',
  failed: 'Not issued: served over HTTP. Berth tries again later.',
};

/** The domain's TLS certificate: where it stands, who issued it, until when, and the CA's last complaint. */
function CertificateFacts(props: { id: string; certificate: NonNullable<CustomDomain['certificate']> }) {
  const c = props.certificate;
  return (
    <section aria-labelledby={`certificate-${props.id}`}>
      <h3 id={`certificate-${props.id}`}>
        HTTPS certificate <StateBadge state={c.status} />
      </h3>
      <p class="muted">{CERTIFICATE_STATUS[c.status]}</p>
      <dl class="facts">
        <dt>Issuer</dt>
        <dd>{c.issuer ?? '—'}</dd>
        <dt>Valid until</dt>
        <dd>
          <Time at={c.not_after} />
        </dd>
        <dt>Renews after</dt>
        <dd>
          <Time at={c.renew_after} />
        </dd>
        {c.last_error && (
          <>
            <dt>Last error</dt>
            <dd class="field-error">{c.last_error}</dd>
          </>
        )}
      </dl>
    </section>
  );
}

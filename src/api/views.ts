/**
 * Projections from rows to the API's shapes. Each names the fields it shows; the route's response
 * schema then serializes exactly those, so a column added later cannot leak.
 * @module
 */
import type { DnsRecordSpec } from '../domain/custom-domain-rules.ts';
import { TIMELINE_MARKS } from '../domain/deployment-states.ts';
import { declaredOpsOf, opsDependencies } from '../domain/ops-json.ts';
import type { Role } from '../domain/roles.ts';
import type { StoredSecret } from '../domain/secret-rules.ts';
import { specView } from '../domain/service-fields.ts';
import { deploymentView } from '../domain/usecases/projections.ts';
import type { MetricsSeries } from '../domain/usecases/service-metrics.ts';
import type { EnvironmentIdentity, Observed } from '../providers/provider.ts';
import type {
  AuditLogRow,
  CertificateRow,
  CustomDomainRow,
  DeploymentLogRow,
  DeploymentOperationRow,
  DeploymentRow,
  DeploymentTimelineRow,
  EnvironmentRow,
  ServiceRow,
  WebhookDeliveryRow,
  WebhookRow,
} from '../store/schema.ts';
import { ZERO_UUID } from './schemas/common.ts';

export { deploymentView, eventView } from '../domain/usecases/projections.ts';

const iso = (d: Date) => d.toISOString();
const unset = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

export function environmentView(env: EnvironmentRow) {
  return {
    id: env.id,
    name: env.name,
    account_id: env.account_id,
    cloud: env.cloud,
    region: env.region,
    state: env.state,
    created_at: iso(env.created_at),
    updated_at: iso(env.updated_at),
  };
}

/**
 * A service's public URL: its active custom domain, else its subdomain under the environment's ingress;
 * with the scheme and port the ingress answers on, so the URL works as it is.
 */
export function originOf(
  subdomain: string,
  identity: EnvironmentIdentity,
  activeDomain: CustomDomainRow | null = null,
) {
  const { scheme, port } = ingressOf(identity.ingress_url);
  const host = activeDomain ? activeDomain.domain : `${subdomain}.${identity.ingress_host}`;
  return `${scheme}//${host}${port}`;
}

// Parsed once per ingress URL, not once per row of a list (100 URL parses a page).
let lastIngress: { url: string; scheme: string; port: string } | undefined;
function ingressOf(url: string) {
  if (lastIngress?.url !== url) {
    const parsed = new URL(url);
    lastIngress = { url, scheme: parsed.protocol, port: parsed.port ? `:${parsed.port}` : '' };
  }
  return lastIngress;
}

export interface ServiceViewOptions {
  identity: EnvironmentIdentity;
  latestDeployment: DeploymentRow | null;
  /** The service's active (deployed) custom domain, if any: it becomes the origin. */
  activeDomain: CustomDomainRow | null;
  /** Only the get-service endpoint hydrates live state and the provisioning fields. */
  live?: Pick<Observed, 'run_status' | 'ready_count'>;
}

export function serviceView(s: ServiceRow, options: ServiceViewOptions) {
  const base = {
    id: s.id,
    ...specView(s),
    state: s.state,
    gitlab_connection_id: unset(s.gitlab_connection_id),
    account_id: s.account_id,
    private_instance_id: s.environment_id,
    subdomain: s.subdomain,
    is_deleted: s.is_deleted,
    latest_deployment: options.latestDeployment ? deploymentView(options.latestDeployment) : null,
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
    kube_secret: s.kube_secret,
    kube_dep_secret: s.kube_dep_secret,
    kube_preview_dep_secret: s.kube_preview_dep_secret,
    custom_domain_id: options.activeDomain?.id ?? ZERO_UUID,
    custom_domain: options.activeDomain ? customDomainSummary(options.activeDomain) : null,
    origin: originOf(s.subdomain, options.identity, options.activeDomain),
    parent_service_id: s.parent_service_id,
    is_preview: s.is_preview,
    pr_number: s.pr_number,
    pr_comment_id: s.pr_comment_id,
  };
  if (!options.live) return base;
  const ops = declaredOpsOf(s);
  return {
    ...base,
    run_status: options.live.run_status,
    ready_count: options.live.ready_count,
    kube_svc_alias: unset(s.kube_svc_alias),
    namespace_name: unset(s.namespace_name),
    ip_whitelist: ops.ip_whitelist.length > 0 ? ops.ip_whitelist : undefined,
    ops_dependencies: opsDependencies(ops),
  };
}

/** `withValues` false: no value at all, as for a sensitive secret (what a viewer reads). */
export function secretView(s: StoredSecret, withValues = true) {
  return {
    key: s.key,
    value: s.is_sensitive || !withValues ? undefined : s.value,
    description: s.description,
    use_preview: s.use_preview,
    is_sensitive: s.is_sensitive,
    expose_to_chart: s.expose_to_chart,
    chart_default_val: s.chart_default_val,
    dep_export: s.dep_export,
    updated_at: iso(s.updated_at),
  };
}

export function auditView(a: AuditLogRow) {
  return {
    id: a.id,
    account_id: a.account_id,
    actor: a.actor,
    token_id: a.token_id,
    token_name: a.token_name,
    user_id: a.user_id,
    user_email: a.user_email,
    action: a.action,
    resource_type: a.resource_type,
    resource_id: a.resource_id,
    environment_id: a.environment_id,
    request_id: a.request_id,
    client_address: a.client_address,
    user_agent: a.user_agent,
    created_at: iso(a.created_at),
  };
}

export function customDomainSummary(d: CustomDomainRow) {
  return { id: d.id, domain: d.domain, origin: `https://${d.domain}`, state: d.state };
}

function certificateView(c: CertificateRow) {
  return {
    status: c.status,
    issuer: c.issuer,
    not_before: c.not_before ? iso(c.not_before) : null,
    not_after: c.not_after ? iso(c.not_after) : null,
    renew_after: c.renew_after ? iso(c.renew_after) : null,
    last_error: c.last_error,
  };
}

export function customDomainView(
  d: CustomDomainRow,
  records: DnsRecordSpec[],
  certificate: CertificateRow | undefined,
) {
  return {
    id: d.id,
    account_id: d.account_id,
    private_instance_id: d.environment_id,
    service_id: d.service_id,
    prov_custom_domain_id: d.prov_custom_domain_id,
    domain: d.domain,
    origin: `https://${d.domain}`,
    state: d.state,
    dns_records: records.map((r) => ({ ...r, created_at: iso(d.created_at) })),
    certificate: certificate ? certificateView(certificate) : null,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
  };
}

/** The spec's success envelope. */
export function success<T>(data: T) {
  return { message: 'success' as const, data };
}

export function metricsView(m: MetricsSeries) {
  return {
    from: iso(m.from),
    to: iso(m.to),
    step: m.step,
    points: m.points.map((p) => ({ ...p, time: iso(p.time) })),
    deployments: m.deployments.map((d) => ({
      ...d,
      created_at: iso(d.created_at),
      finished_at: d.finished_at ? iso(d.finished_at) : null,
    })),
  };
}

export function deploymentLogLineView(l: DeploymentLogRow) {
  return { cursor: String(l.seq), time: iso(l.at), step: l.step, line: l.line, dropped: l.dropped };
}

export function operationView(o: DeploymentOperationRow) {
  return {
    step: o.step,
    state: o.state,
    detail: o.detail,
    started_at: iso(o.started_at),
    finished_at: o.finished_at ? iso(o.finished_at) : null,
    duration_ms: o.finished_at ? o.finished_at.getTime() - o.started_at.getTime() : null,
  };
}

/** In the order it happened; moments of the same millisecond in the order they happen on a rollout. */
export function timelineView(rows: DeploymentTimelineRow[]) {
  const sorted = [...rows].sort(
    (a, b) =>
      a.at.getTime() - b.at.getTime() || TIMELINE_MARKS.indexOf(a.mark) - TIMELINE_MARKS.indexOf(b.mark),
  );
  const start = (sorted.find((r) => r.mark === 'accepted') ?? sorted[0])?.at.getTime() ?? 0;
  return sorted.map((r) => ({
    mark: r.mark,
    at: iso(r.at),
    elapsed_ms: Math.max(0, r.at.getTime() - start),
  }));
}

export function webhookView(w: WebhookRow) {
  return {
    id: w.id,
    url: w.url,
    event_types: w.event_types,
    description: w.description,
    created_at: iso(w.created_at),
  };
}

export function webhookDeliveryView(d: WebhookDeliveryRow) {
  return {
    id: d.id,
    webhook_id: d.webhook_id,
    event_id: String(d.event_seq),
    event_type: d.event_type,
    state: d.state,
    attempts: d.attempts,
    response_code: d.response_code,
    last_error: d.last_error,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
  };
}

/** A token as /v1/tokens shows it (listPeopleTokens' row); `currentTokenId`: the request's own token. */
/** A person a row names by user id and email (joined): null where there is none (an operator's doing). */
function personOf(userId: string | null, email: string | null) {
  return userId !== null && email !== null ? { user_id: userId, email } : null;
}

/** A pending invitation as listed: never its link. */
export function invitationView(i: {
  id: string;
  email: string;
  role: Role;
  invited_by: string | null;
  inviter_email: string | null;
  created_at: Date;
  expires_at: Date;
}) {
  return {
    id: i.id,
    email: i.email,
    role: i.role,
    invited_by: personOf(i.invited_by, i.inviter_email),
    created_at: iso(i.created_at),
    expires_at: iso(i.expires_at),
  };
}

export function tokenView(
  t: {
    id: string;
    name: string | null;
    role: Role;
    owner_user_id: string | null;
    owner_email: string | null;
    environment_ids: string[] | null;
    read_only: boolean;
    expires_at: Date | null;
    last_used_at: Date | null;
    created_at: Date;
    revoked_at: Date | null;
  },
  currentTokenId: string | null,
) {
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    owner: personOf(t.owner_user_id, t.owner_email),
    environment_ids: t.environment_ids,
    read_only: t.read_only,
    expires_at: t.expires_at ? iso(t.expires_at) : null,
    last_used_at: t.last_used_at ? iso(t.last_used_at) : null,
    created_at: iso(t.created_at),
    revoked_at: t.revoked_at ? iso(t.revoked_at) : null,
    current: t.id === currentTokenId,
  };
}

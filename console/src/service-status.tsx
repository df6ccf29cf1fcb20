import { StateBadge } from './ui.tsx';

/** What a service's live figures look like on the list and on its page (both read the same fields). */
export interface LiveService {
  state: string;
  run_status?: string | undefined;
  ready_count?: number | undefined;
  replica_count: number | null;
}

/** The provider's run status in words (the API's values are for programs). */
const RUN_STATUS_LABELS: Record<string, string> = {
  not_deployed: 'Not deployed',
  running: 'Running',
  stopped: 'Stopped',
  scheduled: 'Scheduled',
  completed: 'Completed',
  failed: 'Failed',
  deleted: 'Deleted',
};

export function runStatusLabel(status: string | undefined): string {
  if (!status) return '—';
  const label = RUN_STATUS_LABELS[status];
  if (label) return label;
  const words = status.replaceAll('_', ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function readyText(s: LiveService): string {
  const ready = s.ready_count ?? '—';
  return s.replica_count === null ? String(ready) : `${ready} of ${s.replica_count}`;
}

/**
 * The state, and what it means for traffic: a failed deployment leaves the previous version serving
 * (it is replaced only by a deployment that succeeds), which is a warning, not an outage.
 */
export function ServiceState(props: { service: LiveService }) {
  const s = props.service;
  if (s.state === 'deploy_failed' && (s.ready_count ?? 0) > 0) {
    return (
      <span class="state-note">
        <span class="badge busy">last deploy failed</span>{' '}
        <span>the previous version still serves ({readyText(s)} ready)</span>
      </span>
    );
  }
  return <StateBadge state={s.state} />;
}

import {
  ALERT_RULES,
  type AlertRuleName,
  crashLoopTrip,
  effectiveAlertRules,
  errorRateTrip,
  memoryResolved,
  memoryTrip,
  type Trip,
  type WindowSums,
} from '../domain/alert-rules.ts';
import type { Deps } from '../domain/usecases/context.ts';
import {
  type AlertTransition,
  evaluatedServices,
  hasOpenAlert,
  type MinuteRow,
  openAlert,
  openAlerts,
  recentMinutes,
  recordAlertEvents,
  resolveAlert,
  resolveOpenAlert,
  withEvaluationLock,
} from '../store/repositories/alerts.ts';

type AlertDeps = Pick<Deps, 'store' | 'logger'>;

function sums(rows: MinuteRow[], minutes: number, now: Date): WindowSums {
  const since = now.getTime() - minutes * 60_000;
  const inWindow = rows.filter((r) => r.at.getTime() > since);
  return {
    minutes: inWindow.length,
    restarts: inWindow.reduce((n, r) => n + (r.restarts ?? 0), 0),
    requests: inWindow.reduce((n, r) => n + r.requests, 0),
    status_5xx: inWindow.reduce((n, r) => n + r.status_5xx, 0),
    memory_percent: inWindow.flatMap((r) =>
      r.memory_bytes !== null && r.memory_limit_bytes ? [(100 * r.memory_bytes) / r.memory_limit_bytes] : [],
    ),
  };
}

/**
 * One evaluation of every live service's alert rules as of `now` (after each collection round, and
 * after a deployment ends): opens the alerts whose rule trips, resolves the open ones whose rule no
 * longer holds (or was turned off, or whose service went), each transition an event. One process at a
 * time (an advisory lock: the others skip the round). Returns the transitions, or null when skipped.
 */
export async function evaluateAlerts(
  deps: AlertDeps,
  now = new Date(),
  /** One service's deploy_failed rule alone, as its deployment ends: waits for a round in progress. */
  deployOf?: string,
): Promise<AlertTransition[] | null> {
  return withEvaluationLock(
    deps.store.db,
    async (trx) => {
      const services = await evaluatedServices(trx, deployOf);
      const rulesOf = new Map(services.map((s) => [s.id, effectiveAlertRules(s.rules)]));
      const longest = Math.max(
        1,
        ...[...rulesOf.values()].flatMap((r) => [
          r.crash_loop.minutes,
          r.memory_high.minutes,
          r.error_rate_high.minutes,
        ]),
      );
      const minutesOf = new Map<string, MinuteRow[]>();
      for (const row of deployOf ? [] : await recentMinutes(trx, now, longest)) {
        const list = minutesOf.get(row.service_id) ?? [];
        list.push(row);
        minutesOf.set(row.service_id, list);
      }
      const open = new Map(
        (await openAlerts(trx, deployOf))
          .filter((a) => !deployOf || a.rule === 'deploy_failed')
          .map((a) => [`${a.service_id} ${a.rule}`, a]),
      );
      const transitions: AlertTransition[] = [];

      for (const service of services) {
        const rules = rulesOf.get(service.id) ?? effectiveAlertRules(null);
        const rows = minutesOf.get(service.id) ?? [];
        const trips: Record<AlertRuleName, () => Trip | null> = {
          crash_loop: () => crashLoopTrip(rules.crash_loop, sums(rows, rules.crash_loop.minutes, now)),
          deploy_failed: () =>
            service.state === 'deploy_failed'
              ? {
                  value: null,
                  message:
                    `the latest deployment failed${service.failure_reason ? `: ${service.failure_reason}` : ''}`.slice(
                      0,
                      2000,
                    ),
                }
              : null,
          memory_high: () => memoryTrip(rules.memory_high, sums(rows, rules.memory_high.minutes, now)),
          error_rate_high: () =>
            errorRateTrip(rules.error_rate_high, sums(rows, rules.error_rate_high.minutes, now)),
          // A cron or a job runs only now and then: none ready between runs is how it should be.
          no_ready_replica: () =>
            service.state === 'running' &&
            service.type !== 'cron' &&
            service.type !== 'job' &&
            (service.replica_count ?? 1) > 0 &&
            service.ready_count === 0
              ? { value: 0, message: 'no ready replica while the service should run' }
              : null,
        };
        for (const rule of deployOf ? (['deploy_failed'] as const) : ALERT_RULES) {
          const key = `${service.id} ${rule}`;
          const current = open.get(key);
          open.delete(key);
          const enabled = rules[rule].enabled;
          if (!current) {
            const trip = enabled ? trips[rule]() : null;
            if (trip) {
              const alert = await openAlert(trx, service.id, rule, now, trip.value, trip.message);
              transitions.push({ accountId: service.account_id, alert, type: 'alert.opened' });
            }
            continue;
          }
          // Memory resolves on the latest minute alone; the other rules once they no longer trip.
          const holds =
            enabled &&
            (rule === 'memory_high'
              ? !memoryResolved(rules.memory_high, sums(rows, rules.memory_high.minutes, now))
              : trips[rule]() !== null);
          if (holds) continue;
          const alert = await resolveAlert(trx, current.id, now);
          if (alert) transitions.push({ accountId: service.account_id, alert, type: 'alert.resolved' });
        }
      }
      // Open alerts of services deleted since: their rows go with the service (ON DELETE CASCADE) once it
      // is purged; until then they are resolved, with no one left to need them.
      for (const stale of open.values()) {
        const owner = services.find((s) => s.id === stale.service_id);
        if (owner) continue;
        const alert = await resolveAlert(trx, stale.id, now);
        const account = await trx
          .selectFrom('services')
          .select('account_id')
          .where('id', '=', stale.service_id)
          .executeTakeFirst();
        if (alert && account)
          transitions.push({ accountId: account.account_id, alert, type: 'alert.resolved' });
      }
      await recordAlertEvents(trx, transitions);
      return transitions;
    },
    deployOf !== undefined,
  );
}

/**
 * After a deployment of `serviceId` ended: its deploy_failed alert opens (a failure) or resolves (a
 * success) now, not at the next round. A success without one open costs one read (the deployment's own path),
 * none when the caller looked already (`open`, as the outcome's commit saw it).
 */
export async function evaluateDeployOutcome(
  deps: AlertDeps,
  serviceId: string,
  succeeded: boolean,
  open?: boolean,
): Promise<void> {
  const { db } = deps.store;
  const evaluation = succeeded
    ? // A look first, outside a transaction: most successes have nothing to resolve.
      (open === undefined ? hasOpenAlert(db, serviceId, 'deploy_failed') : Promise.resolve(open)).then(
        async (open) => {
          if (!open) return;
          await db.transaction().execute(async (trx) => {
            const resolved = await resolveOpenAlert(trx, serviceId, 'deploy_failed', new Date());
            if (resolved) await recordAlertEvents(trx, [{ ...resolved, type: 'alert.resolved' }]);
          });
        },
      )
    : evaluateAlerts(deps, new Date(), serviceId);
  await evaluation.catch((err: unknown) =>
    // The deployment's outcome stands; the next collection round evaluates the rule again.
    deps.logger.warn({ err, serviceId }, 'evaluating the deploy_failed alert failed'),
  );
}

/**
 * A service's alert rules (docs/metrics.md, "Alert rules"): what trips each one, with defaults a
 * service gets until it sets its own. The windowed rules read the collector's minute samples; a window
 * of N minutes is the N latest minutes up to the evaluation.
 * @module
 */

export const ALERT_RULES = [
  'crash_loop',
  'deploy_failed',
  'memory_high',
  'error_rate_high',
  'no_ready_replica',
] as const;
export type AlertRuleName = (typeof ALERT_RULES)[number];

export interface AlertRules {
  /** Replica restarts in the window reach `restarts`. */
  crash_loop: { enabled: boolean; restarts: number; minutes: number };
  /** The service's latest deployment failed (until one succeeds). */
  deploy_failed: { enabled: boolean };
  /** Every minute of the window, memory above `percent` of the limit (services with a limit only). */
  memory_high: { enabled: boolean; percent: number; minutes: number };
  /** 5xx share of the window's requests at or above `percent`, with at least `min_requests` requests. */
  error_rate_high: { enabled: boolean; percent: number; min_requests: number; minutes: number };
  /** The service should run (running, replicas wanted) and the runtime reports no ready replica. */
  no_ready_replica: { enabled: boolean };
}

export const DEFAULT_ALERT_RULES: AlertRules = {
  crash_loop: { enabled: true, restarts: 3, minutes: 10 },
  deploy_failed: { enabled: true },
  memory_high: { enabled: true, percent: 90, minutes: 5 },
  error_rate_high: { enabled: true, percent: 5, min_requests: 20, minutes: 5 },
  no_ready_replica: { enabled: true },
};

/** The longest window a rule may have: the minute samples are kept a day. */
export const MAX_ALERT_WINDOW_MINUTES = 1440;

export type AlertRulesInput = { [K in AlertRuleName]?: Partial<AlertRules[K]> };

/** A service's rules: its own settings over the defaults, rule by rule and field by field. */
export function effectiveAlertRules(own: AlertRulesInput | null | undefined): AlertRules {
  const rules = structuredClone(DEFAULT_ALERT_RULES);
  for (const name of ALERT_RULES) Object.assign(rules[name], own?.[name] ?? {});
  return rules;
}

/** What a rule says it watches, for messages. */
export interface Trip {
  /** The value that tripped it, in the rule's unit (percent, restarts, ready replicas); null without one. */
  value: number | null;
  message: string;
}

/** One service's minute samples over a window, summed. */
export interface WindowSums {
  minutes: number;
  restarts: number;
  requests: number;
  status_5xx: number;
  /** Memory as a percent of the limit, per minute sample that has both (newest first). */
  memory_percent: number[];
}

const round1 = (n: number) => Math.round(n * 10) / 10;

export function crashLoopTrip(rule: AlertRules['crash_loop'], w: WindowSums): Trip | null {
  if (w.restarts < rule.restarts) return null;
  return {
    value: w.restarts,
    message: `${w.restarts} restarts in the last ${rule.minutes} minutes (the rule: ${rule.restarts})`,
  };
}

export function memoryTrip(rule: AlertRules['memory_high'], w: WindowSums): Trip | null {
  const above = w.memory_percent.filter((p) => p > rule.percent);
  if (w.memory_percent.length < rule.minutes || above.length < rule.minutes) return null;
  const latest = round1(w.memory_percent[0] ?? 0);
  return {
    value: latest,
    message: `memory at ${latest}% of its limit, above ${rule.percent}% for ${rule.minutes} minutes`,
  };
}

/** The memory alert resolves once the latest minute is at or below the threshold (or the service stopped). */
export function memoryResolved(rule: AlertRules['memory_high'], w: WindowSums): boolean {
  const latest = w.memory_percent[0];
  return latest === undefined || latest <= rule.percent;
}

export function errorRateTrip(rule: AlertRules['error_rate_high'], w: WindowSums): Trip | null {
  if (w.requests < rule.min_requests || w.requests === 0) return null;
  const percent = (100 * w.status_5xx) / w.requests;
  if (percent < rule.percent) return null;
  return {
    value: round1(percent),
    message: `${round1(percent)}% of ${w.requests} requests answered 5xx in the last ${rule.minutes} minutes (the rule: ${rule.percent}%)`,
  };
}

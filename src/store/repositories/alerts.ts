/**
 * Alert rules and alerts (migration 0040): a service's settings, its alerts' history, and one
 * evaluation round's reads and transitions.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { AlertRuleName, AlertRulesInput } from '../../domain/alert-rules.ts';
import type { Db } from '../database.ts';
import { recordEvent } from '../events.ts';
import type { AlertsTable } from '../schema.ts';
import type { Page, Position } from './paging.ts';

export type AlertRow = AlertsTable;

export async function ownAlertRules(db: Db, serviceId: string): Promise<AlertRulesInput | null> {
  const row = await db
    .selectFrom('alert_rules')
    .select('rules')
    .where('service_id', '=', serviceId)
    .executeTakeFirst();
  return (row?.rules as AlertRulesInput | undefined) ?? null;
}

export async function putAlertRules(db: Db, serviceId: string, rules: AlertRulesInput): Promise<void> {
  const json = JSON.stringify(rules);
  await db
    .insertInto('alert_rules')
    .values({ service_id: serviceId, rules: json })
    .onConflict((oc) =>
      oc.column('service_id').doUpdateSet({ rules: json, updated_at: sql`clock_timestamp()` }),
    )
    .execute();
}

/** A service's alerts, newest opened first, paged on (opened_at, id). */
export async function listAlerts(
  db: Db,
  serviceId: string,
  page: Page,
): Promise<{ items: AlertRow[]; next: Position | null }> {
  let q = db.selectFrom('alerts').selectAll().where('service_id', '=', serviceId);
  if (page.after) {
    const { createdAt, id } = page.after;
    q = q.where(sql<boolean>`(opened_at, id) < (${createdAt.toISOString()}::timestamptz, ${id}::uuid)`);
  }
  const rows = await q
    .orderBy('opened_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit);
  const last = items.at(-1);
  return {
    items,
    next: rows.length > page.limit && last ? { createdAt: last.opened_at, id: last.id } : null,
  };
}

/** What one round knows of a service that may have alerts. */
export interface EvaluatedService {
  id: string;
  account_id: string;
  environment_id: string;
  name: string;
  type: string | null;
  state: string;
  replica_count: number | null;
  ready_count: number | null;
  rules: AlertRulesInput | null;
  failure_reason: string | null;
}

/** Live services with their rules, their last observation and their latest deployment's failure reason. */
export async function evaluatedServices(db: Db, serviceId?: string): Promise<EvaluatedService[]> {
  let q = db
    .selectFrom('services as s')
    .leftJoin('alert_rules as r', 'r.service_id', 's.id')
    .leftJoin('service_observations as o', 'o.service_id', 's.id')
    .leftJoin('deployments as d', 'd.id', 's.latest_deployment_id')
    .select([
      's.id',
      's.account_id',
      's.environment_id',
      's.name',
      's.type',
      's.state',
      's.replica_count',
      'o.ready_count',
      'r.rules',
      'd.failure_reason',
    ])
    .where('s.is_deleted', '=', false);
  if (serviceId) q = q.where('s.id', '=', serviceId);
  const rows = await q.execute();
  return rows.map((row) => ({ ...row, rules: (row.rules as AlertRulesInput | null) ?? null }));
}

/** One minute sample, as the rules read it. */
export interface MinuteRow {
  service_id: string;
  at: Date;
  restarts: number | null;
  requests: number;
  status_5xx: number;
  memory_bytes: number | null;
  memory_limit_bytes: number | null;
}

/** Every service's minute samples in (now - minutes, now], newest first. */
export async function recentMinutes(db: Db, now: Date, minutes: number): Promise<MinuteRow[]> {
  const { rows } = await sql<MinuteRow>`
    SELECT service_id, at, restarts, requests, status_5xx, memory_bytes::float8 AS memory_bytes,
      memory_limit_bytes::float8 AS memory_limit_bytes
    FROM service_metrics
    WHERE resolution_s = 60 AND at > ${new Date(now.getTime() - minutes * 60_000)} AND at <= ${now}
    ORDER BY at DESC`.execute(db);
  return rows;
}

export async function openAlerts(db: Db, serviceId?: string): Promise<AlertRow[]> {
  let q = db.selectFrom('alerts').selectAll().where('state', '=', 'open');
  if (serviceId) q = q.where('service_id', '=', serviceId);
  return q.execute();
}

/** The advisory lock that makes one process at a time evaluate the alert rules. */
const EVALUATE_LOCK = 7342030;

/**
 * Runs `round` in a transaction holding the evaluation lock. Null (without running it) when another
 * process holds it, unless `wait`: then it waits its turn.
 */
export async function withEvaluationLock<T>(
  db: Db,
  round: (trx: Db) => Promise<T>,
  wait = false,
): Promise<T | null> {
  return db.transaction().execute(async (trx) => {
    if (wait) {
      await sql`SELECT pg_advisory_xact_lock(${EVALUATE_LOCK})`.execute(trx);
      return round(trx);
    }
    const { rows } = await sql<{
      locked: boolean;
    }>`SELECT pg_try_advisory_xact_lock(${EVALUATE_LOCK}) AS locked`.execute(trx);
    if (!rows[0]?.locked) return null;
    return round(trx);
  });
}

export interface AlertTransition {
  accountId: string;
  alert: AlertRow;
  type: 'alert.opened' | 'alert.resolved';
}

export async function openAlert(
  db: Db,
  serviceId: string,
  rule: AlertRuleName,
  at: Date,
  value: number | null,
  message: string,
): Promise<AlertRow> {
  return db
    .insertInto('alerts')
    .values({ id: randomUUID(), service_id: serviceId, rule, state: 'open', opened_at: at, value, message })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function resolveAlert(db: Db, id: string, at: Date): Promise<AlertRow | undefined> {
  return db
    .updateTable('alerts')
    .set({ state: 'resolved', resolved_at: at })
    .where('id', '=', id)
    .where('state', '=', 'open')
    .returningAll()
    .executeTakeFirst();
}

export async function hasOpenAlert(db: Db, serviceId: string, rule: AlertRuleName): Promise<boolean> {
  const row = await db
    .selectFrom('alerts')
    .select('id')
    .where('service_id', '=', serviceId)
    .where('rule', '=', rule)
    .where('state', '=', 'open')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Resolves the service's open alert of `rule`, if it has one, with its account for the event. One
 * statement: safe beside an evaluation round (only one of them moves the row).
 */
export async function resolveOpenAlert(
  db: Db,
  serviceId: string,
  rule: AlertRuleName,
  at: Date,
): Promise<{ alert: AlertRow; accountId: string } | undefined> {
  const { rows } = await sql<AlertRow & { account_id: string }>`
    UPDATE alerts a SET state = 'resolved', resolved_at = ${at}
    FROM services s
    WHERE s.id = a.service_id AND a.service_id = ${serviceId} AND a.rule = ${rule} AND a.state = 'open'
    RETURNING a.*, s.account_id`.execute(db);
  const row = rows[0];
  if (!row) return undefined;
  const { account_id, ...alert } = row;
  return { alert, accountId: account_id };
}

/** An alert as its events carry it (and as the API shows it). */
export function alertData(alert: AlertRow) {
  return {
    id: alert.id,
    service_id: alert.service_id,
    rule: alert.rule,
    state: alert.state,
    opened_at: alert.opened_at.toISOString(),
    resolved_at: alert.resolved_at?.toISOString() ?? null,
    value: alert.value,
    message: alert.message,
  };
}

/** Records alert transitions as events (GET /v1/events, webhooks), written at the transaction's commit (store/events.ts). */
export async function recordAlertEvents(trx: Db, transitions: AlertTransition[]): Promise<void> {
  for (const { accountId, alert, type } of transitions)
    await recordEvent(trx, accountId, type, alertData(alert));
}

import { sql } from 'kysely';
import type { DeployStep, OperationState, TimelineMark } from '../../domain/deployment-states.ts';
import type { Db } from '../database.ts';
import { TOPICS } from '../notifications.ts';
import type { DeploymentLogRow, DeploymentOperationRow, DeploymentTimelineRow } from '../schema.ts';

/** Lines a deployment keeps; older ones are dropped, and one marker line says how many. */
export const MAX_LOG_LINES = 2000;

export interface LogEntry {
  step: DeployStep;
  line: string;
  at: Date;
}

/** A step's state as a writer last saw it; `started_at` of a step already recorded is kept. */
export interface OperationChange {
  step: DeployStep;
  state: OperationState;
  detail?: string;
  startedAt: Date;
  finishedAt: Date | null;
}

/** A moment of the deployment's timeline. */
export interface TimelineEntry {
  mark: TimelineMark;
  at: Date;
}

/**
 * Appends lines, operation changes and timeline moments to a deployment's log, in one statement. `trx`
 * must be a transaction: the advisory lock on the deployment it takes lasts until commit, so lines of
 * one deployment commit in `seq` order and a follower reading after a cursor never skips a line
 * committed late.
 */
export async function appendDeploymentLog(
  trx: Db,
  deploymentId: string,
  entries: LogEntry[],
  operations: OperationChange[] = [],
  timeline: TimelineEntry[] = [],
): Promise<void> {
  if (entries.length === 0 && operations.length === 0 && timeline.length === 0) return;
  const changes = mergedByStep(operations);
  // Each write below reads `locked` (a materialized CTE, evaluated once, before the first row any of
  // them writes): the lock is held before a line's `seq` is drawn. The notification goes with the lock:
  // NOTIFY is delivered at commit wherever in the transaction it was issued (and not at all on a
  // rollback), so followers still read only lines that committed.
  const writes = [
    sql`locked AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtext(${deploymentId})), pg_notify(${TOPICS.logs}, ${deploymentId}))`,
  ];
  if (entries.length > 0)
    writes.push(sql`lines AS (
      INSERT INTO deployment_logs (deployment_id, step, line, at)
      SELECT ${deploymentId}::uuid, l.step, l.line, l.at
      FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(entries)}::jsonb) AS (step text, line text, at timestamptz))
        WITH ORDINALITY AS l(step, line, at, n), locked
      ORDER BY l.n
      RETURNING 1)`);
  if (changes.length > 0)
    writes.push(sql`steps AS (
      INSERT INTO deployment_operations (deployment_id, step, state, detail, started_at, finished_at)
      SELECT ${deploymentId}::uuid, o.step, o.state, coalesce(o.detail, ''), o."startedAt", o."finishedAt"
      FROM jsonb_to_recordset(${JSON.stringify(changes)}::jsonb) AS o(step text, state text, detail text, "startedAt" timestamptz, "finishedAt" timestamptz),
        locked
      ON CONFLICT (deployment_id, step) DO UPDATE SET state = excluded.state,
        detail = CASE WHEN excluded.detail <> '' THEN excluded.detail ELSE deployment_operations.detail END,
        finished_at = excluded.finished_at
      RETURNING 1)`);
  // The first time a moment happened is the one kept (a rerun after a crash claims the job again).
  if (timeline.length > 0)
    writes.push(sql`marks AS (
      INSERT INTO deployment_timeline (deployment_id, mark, at)
      SELECT ${deploymentId}::uuid, m.mark, m.at
      FROM jsonb_to_recordset(${JSON.stringify(timeline)}::jsonb) AS m(mark text, at timestamptz), locked
      ON CONFLICT (deployment_id, mark) DO NOTHING
      RETURNING 1)`);
  // The lines kept before this write (as the statement's snapshot sees them) and those it adds: the
  // bound is checked without a statement of its own; only a write past it trims.
  const counted = entries.length > 0 ? sql`(SELECT count(*) FROM lines)` : sql`0`;
  const { rows } = await sql<{ kept: string; added: string }>`
    WITH ${sql.join(writes)}
    SELECT (SELECT count(*) FROM deployment_logs WHERE deployment_id = ${deploymentId} AND dropped IS NULL) AS kept,
      ${counted} AS added
    FROM locked`.execute(trx);
  const row = rows[0];
  if (row && Number(row.kept) + Number(row.added) > MAX_LOG_LINES) await trimLog(trx, deploymentId);
}

/**
 * One change per step, as the changes one after another would leave it (the first start, the last
 * state and end, the last detail given): one statement writes them all, and a statement may not
 * upsert a row twice.
 */
function mergedByStep(operations: OperationChange[]): OperationChange[] {
  const byStep = new Map<DeployStep, OperationChange>();
  for (const op of operations) {
    const earlier = byStep.get(op.step);
    byStep.set(
      op.step,
      earlier ? { ...op, startedAt: earlier.startedAt, detail: op.detail ? op.detail : earlier.detail } : op,
    );
  }
  return [...byStep.values()];
}

/**
 * Keeps the newest MAX_LOG_LINES lines. The newest of the lines dropped becomes the marker (so it sorts
 * before every line kept) and counts every line dropped so far; the previous marker goes.
 */
async function trimLog(trx: Db, deploymentId: string): Promise<void> {
  const { count } = await trx
    .selectFrom('deployment_logs')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('deployment_id', '=', deploymentId)
    .where('dropped', 'is', null)
    .executeTakeFirstOrThrow();
  const excess = Number(count) - MAX_LOG_LINES;
  if (excess <= 0) return;
  const oldest = await trx
    .selectFrom('deployment_logs')
    .select(['seq', 'step'])
    .where('deployment_id', '=', deploymentId)
    .where('dropped', 'is', null)
    .orderBy('seq')
    .limit(excess)
    .execute();
  const marker = await trx
    .selectFrom('deployment_logs')
    .select(['seq', 'dropped'])
    .where('deployment_id', '=', deploymentId)
    .where('dropped', 'is not', null)
    .executeTakeFirst();
  const total = (marker?.dropped ?? 0) + excess;
  const keep = oldest.at(-1) as { seq: string };
  const gone = [...oldest.slice(0, -1).map((r) => r.seq), ...(marker ? [marker.seq] : [])];
  if (gone.length > 0) await trx.deleteFrom('deployment_logs').where('seq', 'in', gone).execute();
  await trx
    .updateTable('deployment_logs')
    .set({
      dropped: total,
      line: `[${total} earlier lines dropped: a deployment keeps its newest ${MAX_LOG_LINES} lines]`,
    })
    .where('seq', '=', keep.seq)
    .execute();
}

/** Lines after `afterSeq` (all when null), oldest first, at most `limit`. */
export async function deploymentLogAfter(
  db: Db,
  deploymentId: string,
  afterSeq: string | null,
  limit: number,
): Promise<DeploymentLogRow[]> {
  let query = db.selectFrom('deployment_logs').selectAll().where('deployment_id', '=', deploymentId);
  if (afterSeq !== null) query = query.where('seq', '>', afterSeq);
  return query.orderBy('seq').limit(limit).execute();
}

export async function deploymentOperations(db: Db, deploymentId: string): Promise<DeploymentOperationRow[]> {
  return db
    .selectFrom('deployment_operations')
    .selectAll()
    .where('deployment_id', '=', deploymentId)
    .orderBy('started_at')
    .execute();
}

/** The deployment's timeline, in the order it happened. */
export async function deploymentTimeline(db: Db, deploymentId: string): Promise<DeploymentTimelineRow[]> {
  return db
    .selectFrom('deployment_timeline')
    .selectAll()
    .where('deployment_id', '=', deploymentId)
    .orderBy('at')
    .execute();
}

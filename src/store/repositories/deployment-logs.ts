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
 * Appends lines, operation changes and timeline moments to a deployment's log. `trx` must be a transaction: the advisory
 * lock on the deployment it takes lasts until commit, so lines of one deployment commit in `seq` order
 * and a follower reading after a cursor never skips a line committed late.
 */
export async function appendDeploymentLog(
  trx: Db,
  deploymentId: string,
  entries: LogEntry[],
  operations: OperationChange[] = [],
  timeline: TimelineEntry[] = [],
): Promise<void> {
  if (entries.length === 0 && operations.length === 0 && timeline.length === 0) return;
  // The notification goes with the lock, in one statement: NOTIFY is delivered at commit wherever in
  // the transaction it was issued (and not at all on a rollback), so followers still read only lines
  // that committed.
  await sql`SELECT pg_advisory_xact_lock(hashtext(${deploymentId})), pg_notify(${TOPICS.logs}, ${deploymentId})`.execute(
    trx,
  );
  if (entries.length > 0) {
    await trx
      .insertInto('deployment_logs')
      .values(entries.map((e) => ({ deployment_id: deploymentId, step: e.step, line: e.line, at: e.at })))
      .execute();
    await trimLog(trx, deploymentId);
  }
  const changes = mergedByStep(operations);
  // The first time a moment happened is the one kept (a rerun after a crash claims the job again).
  const marks = (into: Pick<Db, 'insertInto'>) =>
    into
      .insertInto('deployment_timeline')
      .values(timeline.map((t) => ({ deployment_id: deploymentId, mark: t.mark, at: t.at })))
      .onConflict((oc) => oc.columns(['deployment_id', 'mark']).doNothing());
  if (changes.length === 0) {
    if (timeline.length > 0) await marks(trx).execute();
    return;
  }
  const steps = trx
    .insertInto('deployment_operations')
    .values(
      changes.map((op) => ({
        deployment_id: deploymentId,
        step: op.step,
        state: op.state,
        detail: op.detail ?? '',
        started_at: op.startedAt,
        finished_at: op.finishedAt,
      })),
    )
    .onConflict((oc) =>
      oc.columns(['deployment_id', 'step']).doUpdateSet((eb) => ({
        state: eb.ref('excluded.state'),
        detail: sql<string>`CASE WHEN excluded.detail <> '' THEN excluded.detail ELSE deployment_operations.detail END`,
        finished_at: eb.ref('excluded.finished_at'),
      })),
    );
  // Step changes and timeline moments usually come together: one statement writes both.
  if (timeline.length === 0) await steps.execute();
  else await marks(trx.with('steps', () => steps)).execute();
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

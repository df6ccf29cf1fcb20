import type { Db } from '../database.ts';
import { recordLogWrite } from '../events.ts';
import type { LogEntry, OperationChange, TimelineEntry } from '../log-at-commit.ts';
import type { DeploymentLogRow, DeploymentOperationRow, DeploymentTimelineRow } from '../schema.ts';

/**
 * Appends lines, operation changes and timeline moments to a deployment's log, written by `trx`'s
 * commit (log-at-commit.ts): under the deployment's advisory lock, held until that commit, so lines of
 * one deployment commit in `seq` order and a follower reading after a cursor never skips a line
 * committed late. `trx` must be a transaction.
 */
export async function appendDeploymentLog(
  trx: Db,
  deploymentId: string,
  entries: LogEntry[],
  operations: OperationChange[] = [],
  timeline: TimelineEntry[] = [],
): Promise<void> {
  if (entries.length === 0 && operations.length === 0 && timeline.length === 0) return;
  await recordLogWrite(trx, { deploymentId, entries, operations, timeline });
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

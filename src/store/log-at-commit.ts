/**
 * A deployment's log written at its transaction's commit (events.ts): the lines, the steps' changes and
 * the timeline a transaction records are written by one statement just before the events' statement,
 * with the deployment's advisory lock and the notification followers wait on; that statement also
 * names the deployments whose lines went past the bound, and only their logs are trimmed, before
 * COMMIT.
 *
 * Order: the lock on each deployment written (in id order) is taken before the lines' `seq` is drawn
 * and lasts until the commit that follows at once, so a deployment's lines commit in `seq` order and a
 * follower reading after a cursor never skips a line committed late. It is taken before the accounts'
 * locks (the events' statement comes after), and nothing else takes it: two commits never wait on each
 * other in a cycle.
 * @module
 */
import { CompiledQuery } from 'kysely';
import type { DeployStep, OperationState, TimelineMark } from '../domain/deployment-states.ts';
import { TOPICS } from './notifications.ts';

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

/** One write of a deployment's log, kept for its transaction's commit. */
export interface LogWrite {
  deploymentId: string;
  entries: LogEntry[];
  operations: OperationChange[];
  timeline: TimelineEntry[];
}

/**
 * The statement that writes a transaction's log writes at its commit, just before the events'
 * statement (events.ts): the deployments' locks and notifications (`log_locked`), then only the parts
 * that have something to write (lines, steps, timeline). Its one row names the deployments whose lines
 * went past the bound (the lines kept before, as the statement's snapshot sees them, and those it
 * adds), space-separated, or is null. A statement of its own rather than CTEs of the events'
 * statement: folded in, it cost the database about 2 ms more CPU a deployment than the three
 * statements it saved (docs/performance.md, "The deployment log's statement").
 */
export function writeLog(writes: readonly LogWrite[]): CompiledQuery {
  const parameters: string[] = [];
  const param = (rows: unknown[]) => `$${parameters.push(JSON.stringify(rows))}`;
  const ids = loggedDeployments(writes);
  const lines = writes.flatMap((w) => w.entries.map((e) => ({ d: w.deploymentId, ...e })));
  const steps = ids.flatMap((id) =>
    mergedByStep(writes.filter((w) => w.deploymentId === id).flatMap((w) => w.operations)).map((o) => ({
      d: id,
      ...o,
    })),
  );
  // The first time a moment happened is the one kept (a rerun after a crash claims the job again).
  const seen = new Set<string>();
  const marks = writes.flatMap((w) =>
    w.timeline.flatMap((m) => {
      const key = `${w.deploymentId} ${m.mark}`;
      if (seen.has(key)) return [];
      seen.add(key);
      return [{ d: w.deploymentId, ...m }];
    }),
  );
  // Each write reads `log_locked` (materialized, evaluated once, before the first row any of them
  // writes; the final select reads it too, so the locks are taken whatever is written): the locks are
  // held before a line's `seq` is drawn. The notification goes with the lock: NOTIFY is delivered at
  // commit (and not at all on a rollback), so followers read only committed lines.
  const ctes = [
    `log_locked AS MATERIALIZED (
      SELECT count(pg_advisory_xact_lock(hashtext(d.id))) AS locks, count(pg_notify('${TOPICS.logs}', d.id)) AS notified
      FROM (SELECT id FROM jsonb_array_elements_text(${param(ids)}::jsonb) AS i(id) ORDER BY id) d
    )`,
  ];
  if (lines.length > 0)
    ctes.push(`log_lines AS (
      INSERT INTO deployment_logs (deployment_id, step, line, at)
      SELECT l.d, l.step, l.line, l.at
      FROM ROWS FROM (jsonb_to_recordset(${param(lines)}::jsonb) AS (d uuid, step text, line text, at timestamptz))
        WITH ORDINALITY AS l(d, step, line, at, n), log_locked
      ORDER BY l.n
      RETURNING deployment_id
    )`);
  if (steps.length > 0)
    ctes.push(`log_steps AS (
      INSERT INTO deployment_operations (deployment_id, step, state, detail, started_at, finished_at)
      SELECT o.d, o.step, o.state, coalesce(o.detail, ''), o."startedAt", o."finishedAt"
      FROM jsonb_to_recordset(${param(steps)}::jsonb) AS o(d uuid, step text, state text, detail text, "startedAt" timestamptz, "finishedAt" timestamptz),
        log_locked
      ON CONFLICT (deployment_id, step) DO UPDATE SET state = excluded.state,
        detail = CASE WHEN excluded.detail <> '' THEN excluded.detail ELSE deployment_operations.detail END,
        finished_at = excluded.finished_at
      RETURNING 1
    )`);
  if (marks.length > 0)
    ctes.push(`log_marks AS (
      INSERT INTO deployment_timeline (deployment_id, mark, at)
      SELECT m.d, m.mark, m.at
      FROM ROWS FROM (jsonb_to_recordset(${param(marks)}::jsonb) AS (d uuid, mark text, at timestamptz))
        WITH ORDINALITY AS m(d, mark, at, n), log_locked
      ORDER BY m.n
      ON CONFLICT (deployment_id, mark) DO NOTHING
      RETURNING 1
    )`);
  const over =
    lines.length === 0
      ? 'NULL::text'
      : `(SELECT string_agg(a.deployment_id::text, ' ' ORDER BY a.deployment_id)
        FROM (SELECT deployment_id, count(*) AS added FROM log_lines GROUP BY deployment_id) a
        WHERE a.added + (SELECT count(*) FROM deployment_logs k WHERE k.deployment_id = a.deployment_id AND k.dropped IS NULL) > ${MAX_LOG_LINES})`;
  return CompiledQuery.raw(
    `WITH ${ctes.join(', ')}
    SELECT ${over} AS over FROM log_locked`,
    parameters,
  );
}

/** The deployments a transaction's log writes are for, in the order their locks are taken. */
function loggedDeployments(writes: readonly LogWrite[]): string[] {
  return [...new Set(writes.map((w) => w.deploymentId))].sort();
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
 * Keeps the newest MAX_LOG_LINES lines of a deployment, run after the commit's statement (which sees
 * its own lines by then). The newest of the lines dropped becomes the marker (so it sorts before every
 * line kept) and counts every line dropped so far; the previous marker goes.
 */
export function trimLog(deploymentId: string): CompiledQuery {
  return CompiledQuery.raw(
    `WITH excess AS (
      SELECT count(*) - ${MAX_LOG_LINES} AS n FROM deployment_logs WHERE deployment_id = $1 AND dropped IS NULL
    ), oldest AS (
      SELECT seq, row_number() OVER (ORDER BY seq DESC) AS r FROM (
        SELECT seq FROM deployment_logs WHERE deployment_id = $1 AND dropped IS NULL
        ORDER BY seq LIMIT greatest((SELECT n FROM excess), 0)) o
    ), marker AS (
      SELECT seq, dropped FROM deployment_logs WHERE deployment_id = $1 AND dropped IS NOT NULL
    ), gone AS (
      DELETE FROM deployment_logs
      WHERE seq IN (SELECT seq FROM oldest WHERE r > 1 UNION ALL SELECT seq FROM marker WHERE (SELECT n FROM excess) > 0)
      RETURNING 1
    )
    UPDATE deployment_logs SET dropped = t.total,
      line = '[' || t.total || ' earlier lines dropped: a deployment keeps its newest ${MAX_LOG_LINES} lines]'
    FROM (SELECT coalesce((SELECT sum(dropped) FROM marker), 0) + (SELECT n FROM excess) AS total) t
    WHERE seq = (SELECT seq FROM oldest WHERE r = 1)`,
    [deploymentId],
  );
}

/**
 * Events (GET /v1/events, webhooks) are recorded by the code that makes the change, in its transaction:
 * the repository that writes an evented row hands it to `recordEvents`, which keeps it with the
 * transaction's connection, and the transaction's commit writes them all just before COMMIT, in one
 * statement: the events rows, the webhook deliveries (with their jobs), the transaction's audit entry
 * and the `events` and `jobs` notifications. An event exists exactly when its change does: a rollback
 * drops them with it.
 *
 * Order: that statement first takes the advisory lock of each account it writes for (in id order, so
 * two such statements never wait on each other in a cycle), then draws the events' `seq`; the lock
 * lasts until the commit that follows at once. So an account's events commit in `seq` order, and a
 * reader that has seen `seq` N never finds a later-committed event of that account below N. Taken last,
 * the lock is never held while waiting on a row lock (no deadlock with the account's other writers).
 * A deployment log's writes have a statement of their own just before (log-at-commit.ts), their lock
 * taken before the accounts'.
 *
 * What each kind records is declared once, in EVENT_SOURCES: adding an event kind is a line there (and
 * its schema in api/schemas/events.ts; test/lifecycle/event-sources.test.ts checks they agree).
 * @module
 */
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryExecutorProvider,
  type RawBuilder,
  sql,
} from 'kysely';
import type { EventKind } from '../domain/events.ts';
import { type LogWrite, trimLog, writeLog } from './log-at-commit.ts';
import { JOB_ACCOUNT_PREFIX, jobAccountKey, TOPICS } from './notifications.ts';
import type { Database } from './schema.ts';

/** Whose events a row's are: the account itself, or what names it (resolved when the events are written). */
type AccountOf = { account: string } | { service: string } | { environment: string };

interface EventSource<T extends keyof Database> {
  table: T;
  /** The row's account, from the row itself. */
  account(row: Record<string, unknown>): AccountOf;
  /** The columns the event keeps as the resource's state: never a sealed value or a credential. */
  columns: ReadonlyArray<keyof Database[T] & string>;
  /** Every write is an event (secrets); otherwise an update that changes nothing but updated_at is not. */
  everyWrite?: true;
  /** bigint columns, which pg reads as text: an event keeps them as numbers. */
  bigints?: ReadonlyArray<keyof Database[T] & string>;
}

const source = <T extends keyof Database>(s: EventSource<T>) => s;
const ownAccount = (row: Record<string, unknown>): AccountOf => ({ account: String(row.account_id) });

/** Each event kind: the table whose rows it reports, how a row names its account, the columns it keeps. */
export const EVENT_SOURCES = {
  deployment: source({
    table: 'deployments',
    account: ownAccount,
    columns: [
      'id',
      'account_id',
      'environment_id',
      'service_id',
      'type',
      'state',
      'prev_deployment_id',
      'prov_deployment_id',
      'git_commit_ref',
      'git_commit_author',
      'git_commit_message',
      'docker_image_tag',
      'helm_chart_version',
      'helm_values_yml',
      'docker_image_digest',
      'note',
      'failure_reason',
      'created_at',
      'updated_at',
    ],
  }),
  service: source({
    table: 'services',
    account: ownAccount,
    columns: [
      'id',
      'account_id',
      'environment_id',
      'name',
      'state',
      'is_deleted',
      'subdomain',
      'latest_deployment_id',
      'created_at',
      'updated_at',
    ],
  }),
  custom_domain: source({
    table: 'custom_domains',
    account: ownAccount,
    columns: [
      'id',
      'account_id',
      'environment_id',
      'service_id',
      'domain',
      'state',
      'failure_reason',
      'created_at',
      'updated_at',
    ],
  }),
  dependency: source({
    table: 'service_resources',
    account: (row) => ({ service: String(row.service_id) }),
    columns: ['service_id', 'kind', 'type', 'resource_id', 'state', 'error', 'provisioned_at', 'updated_at'],
  }),
  dependency_backup: source({
    table: 'dependency_backups',
    account: (row) => ({ service: String(row.service_id) }),
    columns: [
      'id',
      'service_id',
      'kind',
      'type',
      'resource_id',
      'trigger',
      'state',
      'size_bytes',
      'error',
      'created_at',
      'completed_at',
      'restore_state',
      'restore_into',
      'restore_stopped_services',
      'restore_error',
      'restore_requested_at',
      'restore_completed_at',
      'updated_at',
    ],
    bigints: ['size_bytes'],
  }),
  secret: source({
    table: 'secrets',
    account: (row) =>
      row.scope === 'service' ? { service: String(row.scope_id) } : { environment: String(row.scope_id) },
    columns: ['scope', 'scope_id', 'key', 'is_sensitive', 'description', 'updated_at'],
    everyWrite: true,
  }),
} satisfies Record<
  EventKind,
  { table: keyof Database; columns: readonly string[]; bigints?: readonly string[] }
>;

export type EventAction = 'created' | 'updated' | 'deleted';

/** One event waiting for its transaction's commit. */
interface Pending {
  account_id: string | null;
  service_id: string | null;
  environment_id: string | null;
  type: string;
  data: Record<string, unknown>;
}

/**
 * eventState's text, written once per kind and alias: the declared columns are fixed names, and built
 * from a reference and a parameter each (some 50 a row) every update paid for them in Kysely's building
 * and compiling and in the statement's bind.
 */
const eventStates = new Map<string, RawBuilder<unknown>>();

/**
 * The declared columns of a row as one jsonb, but `updated_at`: what an update must change to be an
 * event. `alias` names the row (the table, or the alias of its locked copy).
 */
export function eventState(kind: EventKind, alias: string): RawBuilder<unknown> {
  const key = `${kind} ${alias}`;
  let state = eventStates.get(key);
  if (!state) {
    const columns = (EVENT_SOURCES[kind].columns as readonly string[]).filter((c) => c !== 'updated_at');
    for (const name of [alias, ...columns])
      if (!/^[a-z_]+$/.test(name)) throw new Error(`not a plain name: ${name}`);
    state = sql.raw(`jsonb_build_object(${columns.map((c) => `'${c}', "${alias}"."${c}"`).join(', ')})`);
    eventStates.set(key, state);
  }
  return state;
}

/**
 * Whether a row an update returns changed more than `updated_at`: its state against the one it had
 * (`before_state`, the eventState of the row locked by a subquery `before` in the update's FROM, which
 * the update joins on its key: locked first, so what it read is what the update changed). The subquery
 * locks FOR NO KEY UPDATE, the lock the update takes anyway: FOR UPDATE would also hold off the foreign
 * key checks of other connections (a deployment's log lines), which the transaction may be waiting for.
 */
export function changedSince(kind: EventKind, table: string): RawBuilder<boolean> {
  return sql<boolean>`before.before_state IS DISTINCT FROM ${eventState(kind, table)}`;
}

/** Whether an update setting these columns can be an event: it sets one the event keeps, besides updated_at. */
export function setsEventColumns(kind: EventKind, set: object): boolean {
  const columns: readonly string[] = EVENT_SOURCES[kind].columns;
  return Object.entries(set).some(
    ([c, value]) => value !== undefined && c !== 'updated_at' && columns.includes(c),
  );
}

/**
 * A transaction's writes kept for its commit: its events, its audit entries (one per mutation), the
 * jobs it queues that way (enqueueAtCommit) and its deployment log writes.
 */
interface Pendings {
  events: Pending[];
  audits: Record<string, unknown>[];
  jobs: Record<string, unknown>[];
  logs: LogWrite[];
}
const pendingOf = new WeakMap<DatabaseConnection, Pendings>();
/** Per savepoint, how many writes of each kind were pending when it was made. */
const savepointsOf = new WeakMap<
  DatabaseConnection,
  Map<string, { events: number; audits: number; jobs: number; logs: number }>
>();

/**
 * Records events of `kind` for these rows (each has at least the declared columns), written when `db`'s
 * transaction commits. `db` must be a transaction: outside one the change is already committed, and
 * an event written apart could be lost without it.
 */
export async function recordEvents(
  db: QueryExecutorProvider & { isTransaction: boolean },
  kind: EventKind,
  action: EventAction,
  rows: ReadonlyArray<Record<string, unknown>>,
): Promise<void> {
  if (rows.length === 0) return;
  if (!db.isTransaction) throw new Error(`a ${kind} event must be recorded in the change's transaction`);
  const source: {
    columns: readonly string[];
    bigints?: readonly string[];
    account: EventSource<never>['account'];
  } = EVENT_SOURCES[kind];
  const numeric = (column: string, value: unknown) =>
    source.bigints?.includes(column) && typeof value === 'string' ? Number(value) : value;
  await pend(db, {
    events: rows.map((row) => {
      const account = source.account(row);
      return {
        account_id: 'account' in account ? account.account : null,
        service_id: 'service' in account ? account.service : null,
        environment_id: 'environment' in account ? account.environment : null,
        type: `${kind}.${action}`,
        data: Object.fromEntries(source.columns.map((c) => [c, numeric(c, row[c] ?? null)])),
      };
    }),
  });
}

/** An event that is no row's state (an alert opening): its account, type and data as they are. */
export async function recordEvent(
  db: QueryExecutorProvider & { isTransaction: boolean },
  accountId: string,
  type: string,
  data: Record<string, unknown>,
): Promise<void> {
  if (!db.isTransaction) throw new Error(`a ${type} event must be recorded in the change's transaction`);
  await pend(db, { events: [{ account_id: accountId, service_id: null, environment_id: null, type, data }] });
}

async function pend(db: QueryExecutorProvider, writes: Partial<Pendings>) {
  await db.getExecutor().provideConnection(async (connection) => {
    let pending = pendingOf.get(connection);
    if (!pending) {
      pending = { events: [], audits: [], jobs: [], logs: [] };
      pendingOf.set(connection, pending);
    }
    pending.events.push(...(writes.events ?? []));
    pending.audits.push(...(writes.audits ?? []));
    pending.jobs.push(...(writes.jobs ?? []));
    pending.logs.push(...(writes.logs ?? []));
  });
}

/**
 * Keeps an audit entry (an `audit_logs` row) for `db`'s transaction's commit, where the statement that
 * writes its events writes it too: a mutation's audit costs no statement of its own.
 */
export async function recordAuditRow(
  db: QueryExecutorProvider & { isTransaction: boolean },
  row: Record<string, unknown>,
): Promise<void> {
  if (!db.isTransaction) throw new Error("an audit entry must be recorded in the change's transaction");
  await pend(db, { audits: [row] });
}

/**
 * Keeps a `jobs` row for `db`'s transaction's commit, where the statement that writes its events
 * inserts it (in the order kept) and wakes the workers. The transaction's locks are still held then:
 * jobs queued under a lock keep the order the lock gave them.
 */
export async function recordJobRow(
  db: QueryExecutorProvider & { isTransaction: boolean },
  row: Record<string, unknown>,
): Promise<void> {
  if (!db.isTransaction) throw new Error('a job must be queued at commit in a transaction');
  await pend(db, { jobs: [row] });
}

/**
 * Keeps a write of a deployment's log for `db`'s transaction's commit, which writes them all in one
 * statement (log-at-commit.ts).
 */
export async function recordLogWrite(
  db: QueryExecutorProvider & { isTransaction: boolean },
  write: LogWrite,
): Promise<void> {
  if (!db.isTransaction) throw new Error("a deployment's log is written in a transaction");
  await pend(db, { logs: [write] });
}

/**
 * Rows kept for the commit, as a CTE of its statement inserting them into `table` in the order kept;
 * their columns are the rows' own, the others take their defaults.
 */
function rowsWrite(name: string, table: string, rows: Record<string, unknown>[], param: string): string {
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))].sort();
  for (const column of columns)
    if (!/^[a-z_]+$/.test(column)) throw new Error(`not a column of ${table}: ${column}`);
  const list = columns.join(', ');
  return `, ${name} AS (
      INSERT INTO ${table} (${list})
      SELECT ${list} FROM jsonb_populate_recordset(NULL::${table}, ${param}::jsonb) WITH ORDINALITY AS r
      ORDER BY r.ordinality
      RETURNING 1
    )`;
}

/**
 * The jobs notification of `jobs`: their kinds (a worker wakes only the budgets that run them) and their
 * accounts (a worker wakes no loop for accounts that use their whole share of its slots), or no account
 * when one has none.
 */
function queuedJobs(jobs: Record<string, unknown>[]): string {
  const keys = new Set(jobs.map((job) => String(job.kind)));
  if (jobs.every((job) => typeof job.account_id === 'string'))
    for (const job of jobs) keys.add(jobAccountKey(job.account_id as string));
  return [...keys].join(' ');
}

/**
 * The one statement that writes a transaction's events: locks the accounts (in id order) before a
 * `seq` is drawn (the WHERE's uncorrelated subquery runs once, before the first row), inserts the
 * events in the order they were recorded, a delivery and its job for each webhook that wants one, and
 * notifies. An event whose account is gone (a cascade) is dropped: nobody is left to tell.
 */
function writeEvents({ events: pending, audits, jobs }: Pendings): CompiledQuery {
  const parameters = [JSON.stringify(pending)];
  const param = (json: string) => `$${parameters.push(json)}`;
  const more = (name: string, table: string, rows: Record<string, unknown>[]) =>
    rows.length === 0 ? '' : rowsWrite(name, table, rows, param(JSON.stringify(rows)));
  const writes = more('audit', 'audit_logs', audits) + more('queued', 'jobs', jobs);
  const queued = jobs.length > 0 ? param(queuedJobs(jobs)) : '';
  return CompiledQuery.raw(
    `WITH input AS (
      SELECT e.n, coalesce((e.item ->> 'account_id')::uuid,
        (SELECT s.account_id FROM services s WHERE s.id = (e.item ->> 'service_id')::uuid),
        (SELECT v.account_id FROM environments v WHERE v.id = (e.item ->> 'environment_id')::uuid)) AS account_id,
        e.item ->> 'type' AS type, e.item -> 'data' AS data
      FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(item, n)
    ), event AS (
      INSERT INTO events (account_id, type, data)
      SELECT i.account_id, i.type, i.data FROM input i
      WHERE i.account_id IS NOT NULL AND (SELECT count(*) FROM (
        SELECT pg_advisory_xact_lock(1702, hashtext(a.account_id::text)) FROM (
          SELECT DISTINCT account_id FROM input WHERE account_id IS NOT NULL ORDER BY account_id
        ) a) locked) >= 0
      ORDER BY i.n
      RETURNING seq, account_id, type
    ), delivery AS (
      INSERT INTO webhook_deliveries (webhook_id, event_seq, event_type)
      SELECT w.id, event.seq, event.type FROM event JOIN webhooks w ON w.account_id = event.account_id
        AND (cardinality(w.event_types) = 0 OR event.type = ANY (w.event_types))
      RETURNING id, webhook_id
    ), job AS (
      INSERT INTO jobs (kind, subject_id, max_attempts, account_id)
      SELECT 'deliver_webhook', d.id, 8, w.account_id FROM delivery d JOIN webhooks w ON w.id = d.webhook_id
      RETURNING account_id
    )${writes}
    SELECT count(pg_notify('${TOPICS.events}', a.account_id::text)) FROM (SELECT DISTINCT account_id FROM event) a
    UNION ALL SELECT count(pg_notify('${TOPICS.jobs}', 'deliver_webhook' || (SELECT string_agg(DISTINCT
      ' ${JOB_ACCOUNT_PREFIX}' || account_id::text, '') FROM job))) FROM (SELECT 1 FROM job LIMIT 1) j${
        jobs.length > 0
          ? `
    UNION ALL SELECT count(pg_notify('${TOPICS.jobs}', ${queued}))`
          : ''
      }`,
    parameters,
  );
}

/**
 * The dialect, writing each transaction's recorded events just before its COMMIT (through the
 * connection as Kysely sees it, so the statement is logged like any other).
 */
export function recordingEvents(dialect: Dialect): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createDriver: () => eventWritingDriver(dialect.createDriver()),
  };
}

function eventWritingDriver(inner: Driver): Driver {
  const drop = (connection: DatabaseConnection) => {
    pendingOf.delete(connection);
    savepointsOf.delete(connection);
  };
  return {
    init: (...args) => inner.init(...args),
    acquireConnection: (options) => inner.acquireConnection(options),
    beginTransaction: (connection, settings) => {
      drop(connection);
      return inner.beginTransaction(connection, settings);
    },
    commitTransaction: async (connection) => {
      const pending = pendingOf.get(connection);
      drop(connection);
      if (pending && pending.logs.length > 0) {
        const { rows } = await connection.executeQuery<{ over: string | null }>(writeLog(pending.logs));
        // The deployments whose lines went past the bound (rarely any).
        for (const deploymentId of rows[0]?.over?.split(' ') ?? [])
          await connection.executeQuery(trimLog(deploymentId));
      }
      if (pending && (pending.events.length > 0 || pending.audits.length > 0 || pending.jobs.length > 0))
        await connection.executeQuery(writeEvents(pending));
      await inner.commitTransaction(connection);
    },
    rollbackTransaction: (connection) => {
      drop(connection);
      return inner.rollbackTransaction(connection);
    },
    ...(inner.savepoint && {
      savepoint: (connection, name, compile) => {
        let marks = savepointsOf.get(connection);
        if (!marks) {
          marks = new Map();
          savepointsOf.set(connection, marks);
        }
        const pending = pendingOf.get(connection);
        marks.set(name, {
          events: pending?.events.length ?? 0,
          audits: pending?.audits.length ?? 0,
          jobs: pending?.jobs.length ?? 0,
          logs: pending?.logs.length ?? 0,
        });
        return inner.savepoint?.(connection, name, compile) ?? Promise.resolve();
      },
    }),
    ...(inner.rollbackToSavepoint && {
      rollbackToSavepoint: (connection, name, compile) => {
        const mark = savepointsOf.get(connection)?.get(name);
        const pending = pendingOf.get(connection);
        if (mark !== undefined && pending) {
          pending.events.splice(mark.events);
          pending.audits.splice(mark.audits);
          pending.jobs.splice(mark.jobs);
          pending.logs.splice(mark.logs);
        }
        return inner.rollbackToSavepoint?.(connection, name, compile) ?? Promise.resolve();
      },
    }),
    ...(inner.releaseSavepoint && { releaseSavepoint: inner.releaseSavepoint.bind(inner) }),
    releaseConnection: (connection, options) => inner.releaseConnection(connection, options),
    destroy: (...args) => inner.destroy(...args),
  };
}

/**
 * Runs `change` in `db`'s transaction, or in one of its own outside one: the events it records commit
 * with it.
 */
export function inTransaction<T>(
  db: Kysely<Database>,
  change: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.isTransaction ? change(db) : db.transaction().execute(change);
}

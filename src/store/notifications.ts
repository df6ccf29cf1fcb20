/**
 * The one notification service of a process: every "something changed, look again" of Berth goes
 * through it, on the embedded database (PGlite hands NOTIFYs over in process) and on Postgres (one
 * LISTEN connection of its own for every topic, across processes, delivered when the notifying
 * transaction commits).
 *
 * - Topics are typed (`TOPICS`); a payload is space-separated keys, each naming what changed.
 * - Subscribers hear each notification's keys, and `down` / `up` as the connection goes: while it is
 *   down a notification can be missed, so whatever they hold from notifications must not be trusted.
 * - One wait primitive (`arm`): armed before the read it follows (a NOTIFY between the read and the
 *   wait still wakes it), bounded by a timeout, and woken every second while notifications cannot be
 *   seen, so that a lost connection costs promptness, never a missed change.
 * @module
 */
import { type QueryExecutorProvider, sql } from 'kysely';

/** What each topic announces, and the NOTIFY channel it travels on. */
export const TOPICS = {
  /** A change to what clients poll: `changeTag`s (the triggers of migration 0013 send them). */
  changes: 'berth_changes',
  /**
   * A job can be claimed: the kinds queued (empty: any kind, as the triggers of migrations 0019 and 0029
   * send), then a `jobAccountKey` per account the jobs are of (none: any account, as a process of an
   * earlier version sends; such a process takes those keys for kinds it does not run).
   */
  jobs: 'berth_jobs',
  /** An account has new events: its id. */
  events: 'berth_events',
  /** A deployment's log has new lines: its id. */
  logs: 'berth_deployment_logs',
  /** Who may read changed: `accessKey`s (a revoked token, an account whose plan or access changed). */
  access: 'berth_access',
  /** A running deployment was asked to stop: its id. */
  cancels: 'berth_cancels',
} as const;
export type Topic = keyof typeof TOPICS;

/** The kinds of `changes` tags, as migration 0013's trigger arguments name them. */
export const CHANGE_KINDS = ['deployment', 'service', 'env'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];
export const changeTag = (kind: ChangeKind, id: string): string => `${kind}:${id}`;

/** The prefix of a `jobs` key naming an account; a kind never has one. */
export const JOB_ACCOUNT_PREFIX = 'account:';
export const jobAccountKey = (accountId: string): string => `${JOB_ACCOUNT_PREFIX}${accountId}`;

export const accessKey = (of: 'token' | 'account', id: string): string => `${of}:${id}`;

/** While notifications cannot be seen, a wait ends this often so that its caller looks for itself. */
export const RECHECK_WHILE_DOWN_MS = 1000;

export interface Subscriber {
  /** A notification of the topic committed, naming these keys. */
  notified(keys: string[]): void;
  /** This process committed a write that a `changes` notification will name (it comes later). */
  committedHere?(): void;
  /** Notifications can go unseen from now on. */
  down?(): void;
  /** Notifications are seen again, from now on. */
  up?(): void;
}

/** Where notifications come from: `notify` per NOTIFY, `up` / `down` as its connection goes; returns its stop. */
export type NotificationSource = (events: {
  notify(channel: string, payload: string): void;
  up(): void;
  down(): void;
}) => Promise<() => Promise<void>>;

const topicOf = new Map<string, Topic>(
  Object.entries(TOPICS).map(([topic, channel]) => [channel, topic as Topic]),
);

type Finish = (woken: boolean) => void;

export class Notifications {
  private readonly source: NotificationSource;
  private readonly subscribers = new Map<Topic, Set<Subscriber>>();
  /** Armed waits, by `<topic> <key>`. */
  private readonly waiters = new Map<string, Set<Finish>>();
  private started: Promise<void> | undefined;
  private stop: Promise<() => Promise<void>> | undefined;
  private live = false;
  private armedCount = 0;

  constructor(source: NotificationSource) {
    this.source = source;
  }

  /** True while a notification committed anywhere is sure to be heard. */
  get isLive(): boolean {
    return this.live;
  }

  /** How many waits are armed (tests and the benchmark read it). */
  get armed(): number {
    return this.armedCount;
  }

  /** Starts listening (once); resolves when the first connection is up or has failed. */
  start(): Promise<void> {
    this.started ??= new Promise<void>((settled) => {
      this.stop = this.source({
        notify: (channel, payload) => {
          const topic = topicOf.get(channel);
          if (topic) this.deliver(topic, payload.split(' '));
        },
        up: () => {
          this.live = true;
          for (const set of this.subscribers.values()) for (const s of set) s.up?.();
          settled();
        },
        down: () => {
          this.live = false;
          for (const set of this.subscribers.values()) for (const s of set) s.down?.();
          // A notification may go unheard from now on: every wait looks for itself.
          this.finishAll(true);
          settled();
        },
      });
      this.stop.catch(() => settled());
    });
    return this.started;
  }

  subscribe(topic: Topic, subscriber: Subscriber): () => void {
    let set = this.subscribers.get(topic);
    if (!set) {
      set = new Set();
      this.subscribers.set(topic, set);
    }
    set.add(subscriber);
    if (this.live) subscriber.up?.();
    void this.start();
    return () => {
      this.subscribers.get(topic)?.delete(subscriber);
    };
  }

  /**
   * Arms a wait for any of `on` (topic and key): `woken` resolves true at the next such notification
   * (or, while notifications cannot be seen, within RECHECK_WHILE_DOWN_MS), false after `ms` or when
   * `signal` aborts. It comes wrapped: an async function returning the bare promise would be awaited
   * to its end, not to its arming.
   */
  async arm(
    on: Array<[Topic, string]>,
    ms: number,
    signal?: AbortSignal,
  ): Promise<{ woken: Promise<boolean> }> {
    await this.start();
    return { woken: this.wait(on, ms, signal) };
  }

  private wait(on: Array<[Topic, string]>, ms: number, signal?: AbortSignal): Promise<boolean> {
    if (ms <= 0 || signal?.aborted) return Promise.resolve(false);
    const names = on.map(([topic, key]) => `${topic} ${key}`);
    return new Promise((resolve) => {
      let done = false;
      const finish: Finish = (woken) => {
        if (done) return;
        done = true;
        this.armedCount--;
        clearTimeout(timer);
        signal?.removeEventListener('abort', stopped);
        for (const name of names) {
          const set = this.waiters.get(name);
          set?.delete(finish);
          if (set?.size === 0) this.waiters.delete(name);
        }
        resolve(woken);
      };
      const stopped = () => finish(false);
      const recheck = !this.live && ms > RECHECK_WHILE_DOWN_MS;
      const timer = setTimeout(() => finish(recheck), recheck ? RECHECK_WHILE_DOWN_MS : ms);
      this.armedCount++;
      signal?.addEventListener('abort', stopped, { once: true });
      for (const name of names) {
        let set = this.waiters.get(name);
        if (!set) {
          set = new Set();
          this.waiters.set(name, set);
        }
        set.add(finish);
      }
    });
  }

  /** This process committed a write that `changes` will announce: its subscribers hear it at once. */
  committedHere(): void {
    for (const s of this.subscribers.get('changes') ?? []) s.committedHere?.();
  }

  /** A notification as if it had arrived (the process itself knows, before the round trip). */
  deliver(topic: Topic, keys: string[]): void {
    for (const s of this.subscribers.get(topic) ?? []) s.notified(keys);
    for (const key of keys) {
      const set = this.waiters.get(`${topic} ${key}`);
      if (set) for (const finish of [...set]) finish(true);
    }
  }

  /** Ends every armed wait: true, its caller looks again; false, as if its time had passed. */
  private finishAll(woken: boolean): void {
    const all = new Set<Finish>();
    for (const set of this.waiters.values()) for (const finish of set) all.add(finish);
    for (const finish of all) finish(woken);
  }

  /** Stops listening; armed waits end as if their time had passed. */
  async close(): Promise<void> {
    const stop = this.stop;
    this.stop = undefined;
    this.started = undefined;
    this.live = false;
    this.finishAll(false);
    // A source that never started has nothing to stop.
    const stopping = await stop?.catch(() => undefined);
    await stopping?.();
  }
}

/** Sends a notification when `db`'s transaction commits (at once outside one). */
export async function notify(db: QueryExecutorProvider, topic: Topic, payload: string): Promise<void> {
  await sql`SELECT pg_notify(${TOPICS[topic]}, ${payload})`.execute(db);
}

/** PGlite: notifications of this process, handed over as the committing statement returns. */
export function embeddedSource(
  listen: (channel: string, onNotify: (payload: string) => void) => Promise<() => Promise<void>>,
): NotificationSource {
  return async ({ notify: heard, up }) => {
    const stops = await Promise.all(
      Object.values(TOPICS).map((channel) => listen(channel, (payload) => heard(channel, payload))),
    );
    up();
    return async () => {
      await Promise.all(stops.map((stop) => stop()));
    };
  };
}

/**
 * Postgres: LISTEN on every topic on a connection of its own, outside the pool. A lost connection is
 * `down` at once and is replaced (0.1 s, doubling up to 5 s between attempts); it is `up` again once
 * LISTEN has run.
 */
export function postgresSource(
  databaseUrl: string,
  onConnectionError: (error: Error) => void,
): NotificationSource {
  return async ({ notify: heard, up, down }) => {
    let stopped = false;
    let stopRequested: () => void = () => undefined;
    const stopping = new Promise<void>((resolve) => {
      stopRequested = resolve;
    });
    let wake: (() => void) | undefined;
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    const run = async () => {
      // Loaded here, not at start: an embedded server never needs node-postgres.
      const { default: pg } = await import('pg');
      let backoffMs = 100;
      while (!stopped) {
        const current = new pg.Client({ connectionString: databaseUrl });
        const lost = new Promise<void>((resolve) => {
          current.on('error', (error) => {
            onConnectionError(error);
            resolve();
          });
          current.on('end', () => resolve());
        });
        current.on('notification', (message) => heard(message.channel, message.payload ?? ''));
        // A connection ended while it is still being made may never settle its connect(): a stop does
        // not wait on it (a server that stopped at once would otherwise hang on its way out).
        const listening = current.connect().then(() =>
          current.query(
            Object.values(TOPICS)
              .map((channel) => `LISTEN ${channel};`)
              .join(' '),
          ),
        );
        listening.catch(() => undefined);
        try {
          await Promise.race([listening, stopping]);
          if (!stopped) {
            backoffMs = 100;
            up();
            await Promise.race([lost, stopping]);
          }
        } catch (error) {
          onConnectionError(error as Error);
        }
        down();
        const ended = current.end().catch(() => undefined);
        if (stopped) break;
        await ended;
        await pause(backoffMs);
        backoffMs = Math.min(5000, backoffMs * 2);
      }
    };
    const running = run();
    return async () => {
      stopped = true;
      stopRequested();
      wake?.();
      await running;
    };
  };
}

import type { Logger } from 'pino';
import type { DeployStep, TimelineMark } from '../domain/deployment-states.ts';
import { redactor } from '../domain/redact.ts';
import type { DeployLog } from '../providers/provider.ts';
import type { Db } from '../store/database.ts';
import type { LogEntry, OperationChange, TimelineEntry } from '../store/log-at-commit.ts';
import { appendDeploymentLog } from '../store/repositories/deployment-logs.ts';

/** Buffered lines are written this often, or at once past FLUSH_LINES: a build's output costs few writes. */
const FLUSH_MS = 200;
const FLUSH_LINES = 200;
/** One line of the log is at most this long (a minified bundle printed by a build is not a line to keep whole). */
const MAX_LINE = 4000;

/**
 * The deploy job's DeployLog: masks secret values, buffers lines and step changes, and writes them in
 * small transactions, or in the caller's (`writeIn`), by their commit's statement (log-at-commit.ts).
 * A write that fails is logged and dropped: the log must never fail the deployment it describes.
 */
export class DeploymentLogWriter implements DeployLog {
  private entries: LogEntry[] = [];
  private readonly ops = new Map<DeployStep, OperationChange>();
  private readonly started = new Map<DeployStep, Date>();
  private timeline: TimelineEntry[] = [];
  private readonly marked = new Set<TimelineMark>();
  private mask: (text: string) => string = (text) => text;
  private readonly maskedValues = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private readonly db: Db;
  private readonly deploymentId: string;
  private readonly logger: Logger;

  constructor(db: Db, deploymentId: string, logger: Logger) {
    this.db = db;
    this.deploymentId = deploymentId;
    this.logger = logger;
  }

  /** From here on these values are masked in every line, with every value masked before. */
  maskValues(values: Iterable<string>): void {
    for (const value of values) this.maskedValues.add(value);
    this.mask = redactor(this.maskedValues);
  }

  /** `text` with the masked values masked (a failure reason recorded on the deployment). */
  masked(text: string): string {
    return this.mask(text);
  }

  line(step: DeployStep, text: string): void {
    const at = new Date();
    if (!this.started.has(step)) {
      this.started.set(step, at);
      this.ops.set(step, { step, state: 'running', startedAt: at, finishedAt: null });
    }
    for (const raw of this.mask(text).split(/\r?\n/)) {
      const line = raw.trimEnd();
      if (line) this.entries.push({ step, line: line.slice(0, MAX_LINE), at });
    }
    this.schedule();
  }

  end(step: DeployStep, outcome: 'success' | 'failed', text?: string): void {
    if (text !== undefined) this.line(step, text);
    const at = new Date();
    const startedAt = this.started.get(step) ?? at;
    this.started.set(step, startedAt);
    this.ops.set(step, { step, state: outcome, startedAt, finishedAt: at });
    this.schedule();
  }

  mark(mark: TimelineMark): void {
    if (this.marked.has(mark)) return;
    this.marked.add(mark);
    this.timeline.push({ mark, at: new Date() });
    this.schedule();
  }

  private schedule(): void {
    if (this.entries.length >= FLUSH_LINES) {
      void this.flush();
      return;
    }
    this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  private take(): { entries: LogEntry[]; ops: OperationChange[]; timeline: TimelineEntry[] } {
    clearTimeout(this.timer);
    this.timer = undefined;
    const taken = { entries: this.entries, ops: [...this.ops.values()], timeline: this.timeline };
    this.entries = [];
    this.ops.clear();
    this.timeline = [];
    return taken;
  }

  /** Writes what is buffered; resolves once every earlier write is done. */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      const { entries, ops, timeline } = this.take();
      if (entries.length === 0 && ops.length === 0 && timeline.length === 0) return;
      await this.db
        .transaction()
        .execute((trx) => appendDeploymentLog(trx, this.deploymentId, entries, ops, timeline))
        .catch((error: Error) =>
          this.logger.warn({ err: error, deploymentId: this.deploymentId }, 'deployment log write failed'),
        );
    });
    return this.writing;
  }

  /** Writes what is buffered inside `trx` (the outcome, with the transition), after the writes under way. */
  async writeIn(trx: Db): Promise<void> {
    await this.writing;
    const { entries, ops, timeline } = this.take();
    await appendDeploymentLog(trx, this.deploymentId, entries, ops, timeline);
  }
}

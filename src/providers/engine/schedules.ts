import { Cron } from 'croner';
import type { Logger } from 'pino';

const RESCAN_MS = 5000;

/**
 * Cron schedules kept in step with what an Engine holds (the docker driver's template containers, the
 * swarm driver's template services): `load` says which templates should tick on which schedule; it is
 * read at start and every few seconds, so a restart or a deploy made by another process is picked up.
 * Only `berth serve` starts it; elsewhere `rescan` does nothing.
 */
export class Schedules {
  private readonly schedules = new Map<string, { cron: Cron; schedule: string }>();
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private readonly logger: Logger;
  private readonly load: () => Promise<Map<string, string>>;
  private readonly tick: (templateId: string, at: Date) => Promise<void>;

  constructor(
    logger: Logger,
    load: () => Promise<Map<string, string>>,
    tick: (templateId: string, at: Date) => Promise<void>,
  ) {
    this.logger = logger;
    this.load = load;
    this.tick = tick;
  }

  async start(): Promise<void> {
    this.started = true;
    await this.rescan();
    // A stop during that first scan: no timer is left behind to keep the process alive.
    if (!this.started) return;
    this.timer = setInterval(() => {
      this.rescan().catch((err) => this.logger.warn({ err }, 'cron rescan failed'));
    }, RESCAN_MS);
  }

  stop(): void {
    this.started = false;
    clearInterval(this.timer);
    for (const { cron } of this.schedules.values()) cron.stop();
    this.schedules.clear();
  }

  async rescan(): Promise<void> {
    if (!this.started) return;
    const wanted = await this.load();
    // A stop while the load was under way: a schedule made now would tick for ever.
    if (!this.started) return;
    for (const [id, schedule] of wanted) {
      if (this.schedules.get(id)?.schedule === schedule) continue;
      this.schedules.get(id)?.cron.stop();
      // The scheduled time, not the moment the callback runs: every process names the same tick.
      // The callback returns the tick's promise: croner's protect then skips a tick while the previous
      // one of the same template is still under way (it awaits an async callback), and says so.
      const cron = new Cron(
        schedule,
        {
          protect: () => this.logger.info({ template: id }, 'cron tick skipped: the previous one still runs'),
        },
        (self: Cron) =>
          this.tick(id, self.currentRun() ?? new Date()).catch((err) =>
            this.logger.warn({ err, template: id }, 'cron run failed to start'),
          ),
      );
      this.schedules.set(id, { cron, schedule });
    }
    for (const [id, { cron }] of this.schedules) {
      if (!wanted.has(id)) {
        cron.stop();
        this.schedules.delete(id);
      }
    }
  }
}

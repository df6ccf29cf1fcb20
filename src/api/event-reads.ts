import { maskedEvents } from '../domain/usecases/event-masking.ts';
import type { Db } from '../store/database.ts';
import { eventsAfter } from '../store/repositories/events.ts';
import type { EventRow } from '../store/schema.ts';
import type { SecretBox } from '../store/secret-box.ts';

/**
 * Reads of an account's events shared by the streams that ask for the same page at once: a commit wakes
 * every stream of the account together, and a thousand streams at the same cursor then cost one query.
 * A read is shared only until it starts (it starts on the next turn of the event loop): a stream that
 * asks later may have been woken by an event that read would not see. What it shows is masked
 * (maskedEvents), once for all the streams that share it.
 */
export class EventReads {
  private readonly db: Db;
  private readonly box: SecretBox;
  private readonly pending = new Map<string, Promise<EventRow[]>>();

  constructor(db: Db, box: SecretBox) {
    this.db = db;
    this.box = box;
  }

  after(accountId: string, afterSeq: string, limit: number): Promise<EventRow[]> {
    const key = `${accountId}:${afterSeq}:${limit}`;
    const shared = this.pending.get(key);
    if (shared) return shared;
    const read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.pending.delete(key);
      return eventsAfter(this.db, accountId, afterSeq, limit).then((rows) =>
        maskedEvents(this.db, this.box, rows),
      );
    });
    this.pending.set(key, read);
    return read;
  }
}

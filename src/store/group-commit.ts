/**
 * Group commit: writes that arrive while one batch is being written wait, and go together in the next
 * one transaction (the batch's `write`). No timer: the first caller writes at once, and those arriving
 * meanwhile form the next batch. Each member still gets its own result: `write` settles each alone (a
 * member it skipped, a lost claim say, gets its error while the others commit). When the batch's
 * transaction fails, each of its members is written again alone, so one bad member cannot fail the
 * others and the error each caller sees is its own.
 * @module
 */

/** What `write` made of one member: its result, or its own error (the others committed). */
export type Settled<R> = { value: R } | { error: unknown };

interface Waiting<M, R> {
  member: M;
  resolve(value: R): void;
  reject(error: unknown): void;
}

export class GroupCommit<M, R> {
  readonly #write: (members: M[]) => Promise<Settled<R>[]>;
  readonly #keys: (member: M) => readonly string[];
  #queue: Waiting<M, R>[] = [];
  #writing = false;

  /**
   * `write` writes its members in one transaction, settling each (in order); it throws when that
   * transaction failed (nothing of it committed). `keys`: what a member writes that one statement may
   * write only once (a row's key); a member sharing a key with one already in the batch waits for the
   * next.
   */
  constructor(write: (members: M[]) => Promise<Settled<R>[]>, keys: (member: M) => readonly string[]) {
    this.#write = write;
    this.#keys = keys;
  }

  /** Writes `member` in the next batch: its result once that batch committed, or its own error. */
  submit(member: M): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ member, resolve, reject });
      if (!this.#writing) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#writing = true;
    try {
      while (this.#queue.length > 0) await this.#writeBatch(this.#nextBatch());
    } finally {
      this.#writing = false;
    }
  }

  /** The waiting members, in arrival order, but one sharing a key with an earlier one (it waits). */
  #nextBatch(): Waiting<M, R>[] {
    const taken = new Set<string>();
    const batch: Waiting<M, R>[] = [];
    const left: Waiting<M, R>[] = [];
    for (const waiting of this.#queue) {
      const keys = this.#keys(waiting.member);
      if (keys.some((key) => taken.has(key))) {
        left.push(waiting);
        continue;
      }
      for (const key of keys) taken.add(key);
      batch.push(waiting);
    }
    this.#queue = left;
    return batch;
  }

  async #writeBatch(batch: Waiting<M, R>[]): Promise<void> {
    let settled: Settled<R>[];
    try {
      settled = await this.#write(batch.map((w) => w.member));
    } catch (error) {
      if (batch.length === 1) {
        batch[0]?.reject(error);
        return;
      }
      // Each alone: the member that failed the batch fails by itself, the others commit.
      await Promise.all(batch.map((waiting) => this.#writeBatch([waiting])));
      return;
    }
    for (const [i, waiting] of batch.entries()) {
      const outcome = settled[i];
      if (outcome && 'value' in outcome) waiting.resolve(outcome.value);
      else
        waiting.reject(outcome ? outcome.error : new Error('the batch settled no outcome for this member'));
    }
  }
}

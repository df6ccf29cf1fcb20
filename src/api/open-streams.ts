/**
 * The streams this process holds open (GET /v1/events, log follows), by API token and account: a
 * stream lives only as long as its token may read. When a token is revoked, or its account's access
 * changes, the `access` notification reaches every process (store/notifications.ts) and each one
 * ends the streams that may no longer read, within a notification's round trip. Opening one more
 * stream than a token's or an account's cap is a 429.
 * @module
 */
import { RateLimitedError } from '../domain/errors.ts';
import type { Subscriber } from '../store/notifications.ts';
import type { AuthContext } from './plugins/auth.ts';

export interface StreamLimits {
  perToken: number;
  perAccount: number;
}

interface OpenStream {
  auth: AuthContext | undefined;
  authorization: string | undefined;
  /** Whether the caller, as it is now, may still read this stream (its role, its environments). */
  allows: (auth: AuthContext) => boolean;
  end(): void;
}

export class OpenStreams implements Subscriber {
  private readonly all = new Set<OpenStream>();
  private readonly byToken = new Map<string, Set<OpenStream>>();
  private readonly byAccount = new Map<string, Set<OpenStream>>();
  private readonly limits: StreamLimits;
  /**
   * What a stream's credential (its Authorization header, or its session: plugins/sessions.ts credentialOf)
   * may do now, looked up again, not from a cache; null: nothing.
   */
  private readonly lookUp: (authorization: string | undefined) => Promise<AuthContext | null>;

  constructor(
    limits: StreamLimits,
    lookUp: (authorization: string | undefined) => Promise<AuthContext | null>,
  ) {
    this.limits = limits;
    this.lookUp = lookUp;
  }

  /** How many streams are open. */
  get size(): number {
    return this.all.size;
  }

  /**
   * Counts a stream in, or refuses it (429) past a cap; `end` closes it when its access goes (the token
   * no longer works, or `allows` says its role or environments no longer reach the stream). Returns what
   * removes it again, once it has ended.
   */
  admit(
    auth: AuthContext | undefined,
    authorization: string | undefined,
    end: () => void,
    allows: (auth: AuthContext) => boolean = () => true,
  ): () => void {
    if (auth) {
      const ofToken = this.byToken.get(auth.tokenId)?.size ?? 0;
      if (ofToken >= this.limits.perToken) {
        throw new RateLimitedError(
          `This API token already has ${ofToken} streams open (at most ${this.limits.perToken}): close one before opening another`,
        );
      }
      const ofAccount = this.byAccount.get(auth.accountId)?.size ?? 0;
      if (ofAccount >= this.limits.perAccount) {
        throw new RateLimitedError(
          `This account already has ${ofAccount} streams open (at most ${this.limits.perAccount}): close one before opening another`,
        );
      }
    }
    const stream: OpenStream = { auth, authorization, allows, end };
    this.all.add(stream);
    if (auth) {
      add(this.byToken, auth.tokenId, stream);
      add(this.byAccount, auth.accountId, stream);
    }
    return () => {
      this.all.delete(stream);
      if (auth) {
        remove(this.byToken, auth.tokenId, stream);
        remove(this.byAccount, auth.accountId, stream);
      }
    };
  }

  /** `token:<id>`: that token's streams end. `account:<id>`: the account's streams whose token may no longer read end. */
  notified(keys: string[]): void {
    for (const key of keys) {
      const [of, id = ''] = key.split(':');
      if (of === 'token') for (const stream of [...(this.byToken.get(id) ?? [])]) stream.end();
      if (of === 'account') void this.recheck([...(this.byAccount.get(id) ?? [])]);
    }
  }

  /** After notifications were down (an access change may have gone unheard): every stream is checked. */
  up(): void {
    void this.recheck([...this.all]);
  }

  private async recheck(streams: OpenStream[]): Promise<void> {
    const lookups = new Map<string | undefined, Promise<AuthContext | null | 'unknown'>>();
    for (const stream of streams) {
      if (!stream.auth) continue;
      let lookup = lookups.get(stream.authorization);
      if (!lookup) {
        // A lookup that failed (the database) ends nothing: the next change looks again.
        lookup = this.lookUp(stream.authorization).catch(() => 'unknown' as const);
        lookups.set(stream.authorization, lookup);
      }
      const now = await lookup;
      if (now === null || (now !== 'unknown' && !stream.allows(now))) stream.end();
    }
  }

  /** Ends every stream (the server is closing). */
  endAll(): void {
    for (const stream of [...this.all]) stream.end();
  }
}

function add(map: Map<string, Set<OpenStream>>, key: string, stream: OpenStream): void {
  let set = map.get(key);
  if (!set) {
    set = new Set();
    map.set(key, set);
  }
  set.add(stream);
}

function remove(map: Map<string, Set<OpenStream>>, key: string, stream: OpenStream): void {
  const set = map.get(key);
  set?.delete(stream);
  if (set?.size === 0) map.delete(key);
}

import { EventSourceParserStream } from 'eventsource-parser/stream';

export interface SseEvent {
  id?: string;
  event?: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read JSON payloads of many shapes
  data: any;
}

export interface SseReader {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Resolves once `check(events)` holds (polled as events arrive), or rejects at the deadline. */
  until(what: string, check: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens a server-sent events stream with fetch and parses it with eventsource-parser, as a client would. */
export async function openSse(
  url: string,
  token: string,
  headers: Record<string, string> = {},
): Promise<SseReader> {
  const controller = new AbortController();
  const res = await fetch(url, {
    // No token: the headers authenticate (a session cookie).
    headers: { ...(token && { authorization: `Bearer ${token}` }), accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
  };
  const ended = (async () => {
    if (!res.body) return;
    const stream = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
    try {
      for await (const message of stream) {
        events.push({ id: message.id, event: message.event, data: JSON.parse(message.data) });
        notify();
      }
    } catch (error) {
      if (!controller.signal.aborted) throw error;
    } finally {
      notify();
    }
  })();
  let done = false;
  ended.finally(() => {
    done = true;
    notify();
  });
  return {
    status: res.status,
    headers: res.headers,
    events,
    ended,
    until: (what, check, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(test);
          reject(
            new Error(`timed out after ${timeoutMs} ms waiting for ${what}; got ${JSON.stringify(events)}`),
          );
        }, timeoutMs);
        const test = () => {
          if (check(events)) {
            clearTimeout(timer);
            waiters.delete(test);
            resolve(events);
          } else if (done) {
            clearTimeout(timer);
            waiters.delete(test);
            reject(new Error(`the stream ended before ${what}; got ${JSON.stringify(events)}`));
          }
        };
        waiters.add(test);
        test();
      }),
    close: () => controller.abort(),
  };
}

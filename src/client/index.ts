/**
 * `berth/client`: a typed client of the whole /v1 API. Its types (`openapi.ts`) are generated from the
 * OpenAPI document the server builds from its route schemas, so a change of the API's shape breaks the
 * build of its callers. Calls go through openapi-fetch with retries (retry.ts).
 * @module
 */
import createFetchClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './openapi.ts';
import { type RetryOptions, retryingFetch, UnreachableError } from './retry.ts';

export type { components, paths } from './openapi.ts';
export { type RetryOptions, retryAfterMs, UnreachableError } from './retry.ts';

export type BerthClient = Client<paths>;
export type Deployment =
  paths['/v1/deployments/{deploymentId}']['get']['responses'][200]['content']['application/json']['data']['deployment'];
export type DeploymentLogLine =
  paths['/v1/deployments/{deploymentId}/logs']['get']['responses'][200]['content']['application/json']['data']['lines'][number];
type ServiceLogs = paths['/v1/environments/{envId}/services/{serviceId}/logs']['get'];
/** One line a service printed (GET .../logs). */
export type ServiceLogLine =
  ServiceLogs['responses'][200]['content']['application/json']['data']['lines'][number];
/** A service's metrics over a range (GET .../metrics): points per step and the deployments in it. */
export type ServiceMetrics =
  paths['/v1/environments/{envId}/services/{serviceId}/metrics']['get']['responses'][200]['content']['application/json']['data'];
/**
 * One frame of GET /v1/events (docs/events.md): an event, or (without a `type`) the `expired` notice
 * that a resume past retention gets first.
 */
export type AccountEvent = paths['/v1/events']['get']['responses'][200]['content']['text/event-stream'];
/** The spec's error body: `{error_code, message, errors}`. */
export type ErrorBody = components['schemas']['ErrorBody'];

export interface ClientOptions {
  /** Where the API is, e.g. http://127.0.0.1:8080 (without /v1). */
  baseUrl: string;
  /**
   * The account API token; null: a person signed in to the console, whose browser sends the session cookie
   * (docs/access.md), with the session's CSRF token here.
   */
  token: string | null;
  csrfToken?: string;
  retry?: RetryOptions;
  /** The fetch the retries wrap (default: the global one). */
  fetch?: typeof fetch;
  userAgent?: string;
}

export function createClient(options: ClientOptions): BerthClient {
  return createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: {
      ...(options.token !== null && { authorization: `Bearer ${options.token}` }),
      ...(options.csrfToken && { 'x-csrf-token': options.csrfToken }),
      ...(options.userAgent && { 'user-agent': options.userAgent }),
    },
    fetch: retryingFetch(options.retry, options.fetch),
  });
}

/** An error answer of the API, with its status and the spec's error body. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: Partial<ErrorBody>;
  constructor(status: number, body: unknown) {
    const parsed = (typeof body === 'object' && body !== null ? body : {}) as Partial<ErrorBody>;
    super(parsed.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = parsed;
  }
}

type Unwrapped<T> = T extends { message: 'success'; data: infer D } ? D : T;

/** The `data` of a success envelope (or the whole body when it has none); an ApiError otherwise. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): Unwrapped<T> {
  if (result.error !== undefined || !result.response.ok) {
    throw new ApiError(result.response.status, result.error);
  }
  const body = result.data as { message?: unknown; data?: unknown } | undefined;
  return (body?.message === 'success' && 'data' in body ? body.data : body) as Unwrapped<T>;
}

export const TERMINAL_DEPLOYMENT_STATES: readonly string[] = ['success', 'failed'];

export interface WaitOptions {
  /** Between two reads when the server cannot hold a request (no ETag in its answer; default 1 s). */
  intervalMs?: number;
  /** Give up after this long (default 30 min). */
  timeoutMs?: number;
  /** Called with the first reading and with every reading whose state changed. */
  onChange?: (deployment: Deployment) => void;
  signal?: AbortSignal;
}

export class WaitTimeoutError extends Error {}

/**
 * How long one request asks the server to hold it: under the server's default request timeout (30 s),
 * which would otherwise cut a held request off.
 */
const HOLD_S = 25;

/**
 * Waits for a deployment to be `success` or `failed`, and returns it (a failed one too: check its state).
 * Each read after the first is a waiting read (`If-None-Match` + `Prefer: wait`): the server answers the
 * moment the deployment changes, or 304 after the hold, so the outcome arrives within milliseconds of its
 * commit without polling. A server whose answers carry no ETag is polled every `intervalMs`.
 */
export async function waitForDeployment(
  client: BerthClient,
  deploymentId: string,
  options: WaitOptions = {},
): Promise<Deployment> {
  const intervalMs = options.intervalMs ?? 1000;
  const deadline = Date.now() + (options.timeoutMs ?? 30 * 60_000);
  let seen: string | undefined;
  let etag: string | null = null;
  for (;;) {
    const holdS = Math.max(1, Math.min(HOLD_S, Math.ceil((deadline - Date.now()) / 1000)));
    const headers: Record<string, string> = etag ? { 'if-none-match': etag, prefer: `wait=${holdS}` } : {};
    const result = await client.GET('/v1/deployments/{deploymentId}', {
      params: { path: { deploymentId } },
      headers,
      signal: options.signal,
    });
    if (result.response.status !== 304) {
      etag = result.response.headers.get('etag');
      const { deployment } = unwrap(result);
      if (deployment.state !== seen) options.onChange?.(deployment);
      seen = deployment.state;
      if (TERMINAL_DEPLOYMENT_STATES.includes(deployment.state)) return deployment;
    }
    if (Date.now() > deadline) {
      throw new WaitTimeoutError(`deployment ${deploymentId} is still ${seen}: stopped waiting`);
    }
    if (!etag) await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The frames of a server-sent events answer as they arrive; an ApiError for an error answer. */
async function sseFrames(result: { data?: unknown; error?: unknown; response: Response }) {
  if (!result.response.ok || !result.data) {
    // openapi-fetch has already read an error answer's body into `error`.
    throw new ApiError(result.response.status, result.error);
  }
  // Loaded here: only the two streams parse server-sent events.
  const { EventSourceParserStream } = await import('eventsource-parser/stream');
  return (result.data as ReadableStream<Uint8Array<ArrayBuffer>>)
    .pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream());
}

/** Reconnects of a followed stream that broke off, each resuming after the last frame read. */
const RESUMES = 5;

/**
 * Follows a deployment's log: yields each line as it is written, and returns the deployment from the
 * stream's `end` event, which the server sends once it is terminal (after its last line). A stream that
 * breaks off is opened again after the last line read.
 */
export async function* followDeployment(
  client: BerthClient,
  deploymentId: string,
  options: { signal?: AbortSignal } = {},
): AsyncGenerator<DeploymentLogLine, Deployment> {
  let cursor: string | undefined;
  for (let attempt = 0; attempt <= RESUMES; attempt++) {
    const frames = await sseFrames(
      await client.GET('/v1/deployments/{deploymentId}/logs', {
        params: { path: { deploymentId }, query: { follow: true, cursor } },
        headers: { accept: 'text/event-stream' },
        parseAs: 'stream',
        signal: options.signal,
      }),
    );
    try {
      for await (const frame of frames) {
        if (frame.event === 'end') return (JSON.parse(frame.data) as { deployment: Deployment }).deployment;
        if (frame.event !== 'line') continue;
        cursor = frame.id ?? cursor;
        yield JSON.parse(frame.data) as DeploymentLogLine;
      }
    } catch (error) {
      if (options.signal?.aborted) throw error;
    }
  }
  throw new UnreachableError(`the log of deployment ${deploymentId} kept breaking off before its end`);
}

/**
 * Follows what a service prints (GET .../logs with follow=true): the newest `tail` lines (from `since`
 * on), then each new line as it is printed, until `signal` aborts.
 */
export async function* followServiceLogs(
  client: BerthClient,
  path: { envId: string; serviceId: string },
  query: Omit<NonNullable<ServiceLogs['parameters']['query']>, 'follow'> = {},
  options: { signal?: AbortSignal } = {},
): AsyncGenerator<ServiceLogLine> {
  const frames = await sseFrames(
    await client.GET('/v1/environments/{envId}/services/{serviceId}/logs', {
      params: { path, query: { ...query, follow: true } },
      headers: { accept: 'text/event-stream' },
      parseAs: 'stream',
      signal: options.signal,
    }),
  );
  for await (const frame of frames)
    if (frame.event === 'line') yield JSON.parse(frame.data) as ServiceLogLine;
}

/**
 * Follows the account's events as they commit (GET /v1/events), from right after `after` (an event id,
 * `0` for the oldest kept) or from the next change.
 */
export async function* events(
  client: BerthClient,
  options: { after?: string; signal?: AbortSignal } = {},
): AsyncGenerator<AccountEvent> {
  const frames = await sseFrames(
    await client.GET('/v1/events', {
      params: { query: { last_event_id: options.after } },
      headers: { accept: 'text/event-stream' },
      parseAs: 'stream',
      signal: options.signal,
    }),
  );
  for await (const frame of frames) yield JSON.parse(frame.data) as AccountEvent;
}

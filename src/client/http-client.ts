/**
 * A typed client of Berth's HTTP APIs; its types come from the same schemas the server validates with.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Static } from 'typebox';
import type { Account, ApiToken } from '../api/schemas/admin.ts';
import type { Environment } from '../api/schemas/environments.ts';

export class ApiCallError extends Error {
  readonly status: number;
  readonly body: {
    error_code?: string;
    message?: string;
    errors?: { field: string; error: string }[] | null;
  };
  constructor(status: number, body: ApiCallError['body']) {
    super(body.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

const ATTEMPTS = 3;
const RETRY_DELAY_MS = 200;
const RETRIED_STATUSES = new Set([502, 503, 504]);

export class HttpClient {
  private readonly baseUrl: string;
  private readonly token: string;
  constructor(baseUrl: string, token: string) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.token = token;
  }

  /**
   * One call, tried up to ATTEMPTS times while the server cannot be reached or answers 502/503/504.
   * A POST carries one Idempotency-Key for all its attempts, so a retry of a POST that was done (only
   * its answer was lost) gets the first answer instead of doing it again.
   */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
      ...(method === 'POST' && { 'idempotency-key': randomUUID() }),
    };
    let response: Response | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        response = await fetch(`${this.baseUrl}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (!RETRIED_STATUSES.has(response.status) || attempt === ATTEMPTS) break;
      } catch (error) {
        if (attempt === ATTEMPTS)
          throw new Error(
            `Cannot reach Berth at ${this.baseUrl} (${(error as Error).message}). Is berth serve running?`,
          );
      }
      await sleep(RETRY_DELAY_MS * 2 ** (attempt - 1));
    }
    const text = await response.text();
    const parsed = text ? JSON.parse(text) : {};
    if (!response.ok) throw new ApiCallError(response.status, parsed);
    return (parsed.data ?? parsed) as T;
  }
}

type AccountT = Static<typeof Account>;
type EnvironmentT = Static<typeof Environment>;

/** The operator's calls (/admin/v1). */
export class AdminClient {
  private readonly http: HttpClient;
  constructor(baseUrl: string, adminToken: string) {
    this.http = new HttpClient(`${baseUrl.replace(/\/$/, '')}/admin/v1`, adminToken);
  }
  listAccounts() {
    return this.http.call<{ accounts: AccountT[] }>('GET', '/accounts');
  }
  createAccount(body: { name: string; plan?: AccountT['plan']; features?: AccountT['features'] }) {
    return this.http.call<{ account: AccountT }>('POST', '/accounts', body);
  }
  updateAccount(id: string, body: { plan?: AccountT['plan']; features?: AccountT['features'] }) {
    return this.http.call<{ account: AccountT }>('PATCH', `/accounts/${id}`, body);
  }
  issueToken(accountId: string) {
    return this.http.call<{ api_token: string; token_id: string }>(
      'POST',
      `/accounts/${accountId}/api-tokens`,
      {},
    );
  }
  listTokens(accountId: string) {
    return this.http.call<{ api_tokens: Static<typeof ApiToken>[] }>(
      'GET',
      `/accounts/${accountId}/api-tokens`,
    );
  }
  listEnvironments(accountId: string) {
    return this.http.call<{ environments: EnvironmentT[] }>('GET', `/accounts/${accountId}/environments`);
  }
  revokeToken(tokenId: string) {
    return this.http.call<{ revoked: boolean }>('DELETE', `/api-tokens/${tokenId}`);
  }
  createEnvironment(
    accountId: string,
    body: { name: string; cloud?: EnvironmentT['cloud']; region?: string },
  ) {
    return this.http.call<{ environment: EnvironmentT }>('POST', `/accounts/${accountId}/environments`, body);
  }
}

/**
 * A typed client of Berth's HTTP APIs; its types come from the same schemas the server validates with.
 * @module
 */
import type { Static } from 'typebox';
import type {
  Account,
  ApiToken,
  GitConnection,
  GitConnectionRequest,
  MasterKeyRotation,
  Member,
  User,
} from '../api/schemas/admin.ts';
import type { Environment } from '../api/schemas/environments.ts';
import { retryingFetch, UnreachableError } from './retry.ts';

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

export class HttpClient {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly fetch = retryingFetch({ attempts: 3, baseDelayMs: 200 });
  constructor(baseUrl: string, token: string) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.token = token;
  }

  /** One call, retried as retry.ts says (a POST keeps one Idempotency-Key for all its tries). */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    };
    const request = new Request(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let response: Response;
    try {
      response = await this.fetch(request);
    } catch (error) {
      if (error instanceof UnreachableError)
        throw new UnreachableError(`${error.message}. Is berth serve running?`);
      throw error;
    }
    const text = await response.text();
    const parsed = text ? JSON.parse(text) : {};
    if (!response.ok) throw new ApiCallError(response.status, parsed);
    return (parsed.data ?? parsed) as T;
  }

  /** A GET whose answer is a file: the response, its body unread (an error answer is thrown as usual). */
  async download(path: string): Promise<Response> {
    let response: Response;
    try {
      response = await this.fetch(
        new Request(`${this.baseUrl}${path}`, { headers: { authorization: `Bearer ${this.token}` } }),
      );
    } catch (error) {
      if (error instanceof UnreachableError)
        throw new UnreachableError(`${error.message}. Is berth serve running?`);
      throw error;
    }
    if (!response.ok) {
      const text = await response.text();
      throw new ApiCallError(response.status, text ? JSON.parse(text) : {});
    }
    return response;
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
  createGitConnection(accountId: string, body: GitConnectionRequest) {
    return this.http.call<{ git_connection: Static<typeof GitConnection> }>(
      'POST',
      `/accounts/${accountId}/git-connections`,
      body,
    );
  }
  listGitConnections(accountId: string) {
    return this.http.call<{ git_connections: Static<typeof GitConnection>[] }>(
      'GET',
      `/accounts/${accountId}/git-connections`,
    );
  }
  changeGitConnection(
    connectionId: string,
    body: { name?: string; token?: string; private_key?: string; webhook_secret?: string },
  ) {
    return this.http.call<{ git_connection: Static<typeof GitConnection> }>(
      'PATCH',
      `/git-connections/${connectionId}`,
      body,
    );
  }
  deleteGitConnection(connectionId: string) {
    return this.http.call<{ deleted: boolean }>('DELETE', `/git-connections/${connectionId}`);
  }
  rotateMasterKey() {
    return this.http.call<{ rotation: Static<typeof MasterKeyRotation> }>('POST', '/master-key/rotate', {});
  }
  createUser(body: { email: string; display_name: string }) {
    return this.http.call<{ user: Static<typeof User> }>('POST', '/users', body);
  }
  listUsers() {
    return this.http.call<{ users: Static<typeof User>[] }>('GET', '/users');
  }
  listMembers(accountId: string) {
    return this.http.call<{ members: Static<typeof Member>[] }>('GET', `/accounts/${accountId}/members`);
  }
  setMember(
    accountId: string,
    userId: string,
    body: { role: Static<typeof Member>['role']; environment_ids?: string[] | null },
  ) {
    return this.http.call<{ member: Static<typeof Member> }>(
      'PUT',
      `/accounts/${accountId}/members/${userId}`,
      body,
    );
  }
  removeMember(accountId: string, userId: string) {
    return this.http.call<{ removed: boolean }>('DELETE', `/accounts/${accountId}/members/${userId}`);
  }
  issueMemberToken(accountId: string, userId: string) {
    return this.http.call<{ api_token: string; token_id: string }>(
      'POST',
      `/accounts/${accountId}/members/${userId}/api-tokens`,
      {},
    );
  }
  /** Reads back a dependency's password by its `$passwordArn` (audited on the account). */
  dependencyPassword(arn: string) {
    return this.http.call<{ arn: string; password: string }>(
      'GET',
      `/dependency-passwords?${new URLSearchParams({ arn })}`,
    );
  }
  /** A backup of Berth's own state: the gzip file as the response's body (docs/operations.md). */
  backup() {
    return this.http.download('/backup');
  }
}

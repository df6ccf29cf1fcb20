import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/api/app.ts';
import { type Config, loadConfig } from '../../src/config.ts';
import type { Deps } from '../../src/domain/usecases/context.ts';
import type { Worker } from '../../src/jobs/worker.ts';
import { openRuntime, startWorker } from '../../src/runtime.ts';
import { setEnvironmentState } from '../../src/store/repositories/environments.ts';
import { createTestDatabase } from './database.ts';
import { pollUntil } from './poll.ts';
import { type Route, routeCollector } from './routes.ts';

export const ADMIN_TOKEN = '0b5a3a8e-4a43-4b5e-9d7e-2f3c1f2a9c10';

export interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read JSON bodies of many shapes
  body: any;
  headers: LightMyRequestResponse['headers'];
  raw: string;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Sent as is, for body-parsing tests. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface Tenant {
  accountId: string;
  token: string;
  tokenId: string;
  envId: string;
}

export interface Harness {
  deps: Deps;
  app: Awaited<ReturnType<typeof buildApp>>;
  /** Every route the app registered, as its onRoute hook saw them. */
  routes: Route[];
  queries: string[];
  request(method: string, url: string, options?: RequestOptions): Promise<Reply>;
  admin(method: string, url: string, body?: unknown): Promise<Reply>;
  /** An account with a token and an environment already `available` (setup, not behaviour under test). */
  tenant(options?: { plan?: 'none' | 'starter' | 'pro'; cloud?: 'aws' | 'gcp' }): Promise<Tenant>;
  /** A git connection of the tenant's account (token credential), for services that name one. */
  gitConnection(tenant: Tenant, kind: 'github' | 'gitlab', extra?: Record<string, unknown>): Promise<string>;
  startWorker(): Promise<Worker>;
  /** Stops everything and drops the database; `beforeDrop` sees the closed database's files first. */
  close(beforeDrop?: () => Promise<void>): Promise<void>;
}

/** An app on a fresh database of this file's own (see database.ts), driven through app.inject. */
export async function startHarness(
  overrides: Partial<Config> = {},
  /** Where the log lines go (tests that read them); the process's stdout otherwise. */
  logTo?: pino.DestinationStream,
): Promise<Harness> {
  const db = await createTestDatabase();
  const config: Config = {
    ...loadConfig({}),
    databaseUrl: db.databaseUrl,
    dataDir: db.dataDir,
    providerEnv: { BERTH_SIM_STEP_MS: '20' },
    jobLeaseMs: 2000,
    logLevel: 'silent',
    ...overrides,
  };
  const queries: string[] = [];
  const logger = logTo ? pino({ level: config.logLevel }, logTo) : pino({ level: config.logLevel });
  const runtime = await openRuntime(config, logger, {
    onQuery: (sql) => queries.push(sql),
  });
  const collector = routeCollector();
  const app = await buildApp(runtime.deps, { adminToken: ADMIN_TOKEN, onRoute: collector.onRoute });
  const workers: Worker[] = [];

  const inject = async (
    method: string,
    url: string,
    headers: Record<string, string>,
    payload?: string,
  ): Promise<Reply> => {
    const res = await app.inject({ method: method as 'GET', url, headers, payload, payloadAsStream: true });
    const stream = res.stream();
    // A server-sent events answer lasts as long as what it follows (GET /v1/events never ends): its
    // head is the answer here. Tests that read the events open the stream with fetch (helpers/sse.ts).
    if (String(res.headers['content-type']).startsWith('text/event-stream')) {
      stream.destroy();
      return { status: res.statusCode, body: undefined, headers: res.headers, raw: '' };
    }
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    return { status: res.statusCode, body, headers: res.headers, raw };
  };

  const harness: Harness = {
    deps: runtime.deps,
    app,
    routes: collector.routes,
    queries,
    async request(method, url, options = {}) {
      const headers: Record<string, string> = { ...options.headers };
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      let payload = options.rawBody;
      if (options.body !== undefined) {
        payload = JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      return inject(method, url, headers, payload);
    },
    async admin(method, url, body) {
      const headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` };
      if (body !== undefined) headers['content-type'] = 'application/json';
      return inject(
        method,
        `/admin/v1${url}`,
        headers,
        body === undefined ? undefined : JSON.stringify(body),
      );
    },
    async tenant(options = {}) {
      const account = await harness.admin('POST', '/accounts', {
        name: 'tenant',
        plan: options.plan ?? 'pro',
      });
      const accountId = account.body.data.account.id;
      const token = await harness.admin('POST', `/accounts/${accountId}/api-tokens`);
      const env = await harness.admin('POST', `/accounts/${accountId}/environments`, {
        name: 'test',
        cloud: options.cloud ?? 'aws',
      });
      const envId = env.body.data.environment.id;
      if (workers.length > 0) {
        await pollUntil('the environment to be available', async () => {
          const row = await runtime.deps.store.db
            .selectFrom('environments')
            .select('state')
            .where('id', '=', envId)
            .executeTakeFirst();
          return row?.state === 'available' ? true : undefined;
        });
      } else {
        await setEnvironmentState(runtime.deps.store.db, envId, 'available');
      }
      return { accountId, token: token.body.data.api_token, tokenId: token.body.data.token_id, envId };
    },
    async gitConnection(tenant, kind, extra = {}) {
      const res = await harness.admin('POST', `/accounts/${tenant.accountId}/git-connections`, {
        kind,
        name: `${kind} connection`,
        token: 'test-token',
        webhook_secret: 'test-webhook-secret',
        ...extra,
      });
      if (res.status !== 200) throw new Error(`git connection: ${res.raw}`);
      return res.body.data.git_connection.id as string;
    },
    async startWorker() {
      const worker = startWorker(runtime.deps, { concurrency: 4, pollMs: 100 });
      await worker.start();
      workers.push(worker);
      return worker;
    },
    async close(beforeDrop) {
      await Promise.all(workers.map((w) => w.stop()));
      await app.close();
      await runtime.close();
      await beforeDrop?.();
      await db.drop();
    },
  };
  return harness;
}

/** A valid create body for each source; tests change one field at a time from here. */
export const VALID_SERVICE = {
  docker: {
    name: 'Web App',
    source: 'docker_image',
    type: 'web',
    port: 8080,
    replica_count: 2,
    cpu_count_min: 0.5,
    memory_mb_min: 256,
    docker_image: 'acme/web',
  },
  github: {
    name: 'Git App',
    source: 'github',
    type: 'web',
    port: 3000,
    replica_count: 1,
    cpu_count_min: 1,
    memory_mb_min: 512,
    git_repo_full_name: 'acme/app',
    git_repo_branch: 'main',
  },
  gitlab: {
    name: 'Lab App',
    source: 'gitlab',
    type: 'worker',
    replica_count: 1,
    cpu_count_min: 1,
    memory_mb_min: 512,
    git_repo_full_name: 'acme/lab',
    git_repo_branch: 'main',
  },
  helm: {
    name: 'Chart App',
    source: 'helm_chart',
    helm_chart_repo: 'https://charts.example.com',
    helm_chart_name: 'app',
  },
} as const;

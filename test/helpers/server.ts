import { createTestDatabase, type TestDatabase } from './database.ts';
import { buildBaseImage, freePort, removeEnvironment, requireDocker } from './docker.ts';
import { type BerthProcess, firstStartOf, startBerth } from './process.ts';

/** A `berth serve` of a test file's own, its first start done: the token and an available environment. */
export interface TestServer {
  berth: BerthProcess & { url: string };
  database: TestDatabase;
  token: string;
  envId: string;
  envUrl: string;
  /** Stops the server, removes what the runtime made for the environment, drops the database. */
  close(): Promise<void>;
}

/**
 * The set-up process and docker tests share: a fresh database, `berth serve` on it with `provider`
 * (docker: the engine checked, the base image built, an ingress on a free port), and its first start.
 * `env` adds or overrides settings.
 */
export async function startTestServer(
  provider: 'sim' | 'docker',
  env: Record<string, string> = {},
): Promise<TestServer> {
  if (provider === 'docker') {
    await requireDocker();
    await buildBaseImage();
  }
  const database = await createTestDatabase();
  let berth: (BerthProcess & { url: string }) | undefined;
  let envId: string | undefined;
  const close = async () => {
    await berth?.kill('SIGTERM');
    if (provider === 'docker' && envId) await removeEnvironment(envId);
    await database.drop();
  };
  try {
    berth = await startBerth({
      BERTH_DATA_DIR: database.dataDir,
      BERTH_DATABASE_URL: database.databaseUrl ?? '',
      BERTH_PROVIDER: provider,
      ...(provider === 'docker' ? { BERTH_INGRESS_PORT: String(await freePort()) } : {}),
      ...env,
    });
    const first = await firstStartOf(berth);
    envId = first.envId;
    return { berth, database, ...first, close };
  } catch (error) {
    await close();
    throw error;
  }
}

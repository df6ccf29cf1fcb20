/**
 * The docker provider's ingress (src/providers/engine/ingress.ts) in a process of its own, serving one
 * routed web service over HTTPS with the certificate and key in BENCH_TLS_CERT_FILE / BENCH_TLS_KEY_FILE
 * for BENCH_TLS_NAME, proxying to BENCH_UPSTREAM (`host:port`). Its routing table is a real docker_routes
 * row in an embedded database, read and cached as under `berth serve`; only the containers' addresses
 * (the engine's answer) are given. BENCH_INGRESS_PROXY=haproxy serves HTTPS from HAProxy (a child of this
 * process) as BERTH_INGRESS_PROXY=haproxy does. Prints `https on <url>` once listening. Run by
 * bench/https-ingress.ts.
 * @module
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { DEFAULT_OPS_CONFIG } from '../src/domain/ops-json.ts';
import { startIngress } from '../src/providers/engine/ingress.ts';
import { dockerMigrations, dockerTables } from '../src/providers/engine/tables.ts';
import { Traffic } from '../src/providers/engine/traffic.ts';
import { migrateDriver } from '../src/providers/migrations.ts';
import { openStore } from '../src/store/database.ts';

const name = process.env.BENCH_TLS_NAME as string;
const upstream = process.env.BENCH_UPSTREAM as string;
const served = {
  cert: fs.readFileSync(process.env.BENCH_TLS_CERT_FILE as string, 'utf8'),
  key: fs.readFileSync(process.env.BENCH_TLS_KEY_FILE as string, 'utf8'),
};
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-ingress-'));
const store = await openStore({ dataDir, databaseUrl: undefined });
await migrateDriver(store.db, 'docker', dockerMigrations);
const db = dockerTables(store.db);
await db
  .insertInto('docker_routes')
  .values({
    service_id: randomUUID(),
    deployment_id: randomUUID(),
    environment_id: randomUUID(),
    port: 8080,
    ops: JSON.stringify(DEFAULT_OPS_CONFIG),
    generation: 1,
    subdomain: 'bench',
    type: 'web',
    domains: JSON.stringify([name]),
  })
  .execute();
const ingress = await startIngress({
  db,
  targets: async () => [upstream],
  logger: pino({ level: 'warn' }),
  host: '127.0.0.1',
  port: 0,
  ingressHost: 'apps.bench.test',
  traffic: new Traffic(db),
  tls: {
    certificates: {
      httpChallenge: async () => null,
      alpnChallenge: async () => null,
      certificate: async (n) => (n === name ? served : null),
    },
    port: 0,
    proxy: process.env.BENCH_INGRESS_PROXY === 'haproxy' ? 'haproxy' : 'node',
  },
});
console.log(`https on ${ingress.httpsUrl}`);
const stop = async () => {
  await ingress.close();
  await store.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);

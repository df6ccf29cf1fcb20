import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, test } from 'node:test';
import { openStore, type Store } from '../../src/store/database.ts';
import { TEST_DATABASE } from '../helpers/database.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, createWebService, deploySuccessfully, freePort } from '../helpers/docker.ts';
import { type Pebble, pebbleAvailable, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, listening } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/**
 * Issue 27, done means 3: two worker processes on one Postgres database order certificates from a real
 * CA (pebble, behind a proxy of the test's that counts its newOrder requests by name), and the one
 * holding an order is SIGKILLed at the worst moment: the CA has made the order, Berth has not stored its
 * URL (the proxy holds the CA's answer). The other process takes the job over, finds that order in the
 * account's orders list and finishes it: each name is ordered once and ends with a valid certificate,
 * served over HTTPS to a client that trusts only the CA's root. package.json's test:docker runs this
 * file with BERTH_TEST_DATABASE=postgres.
 */
const KILLED = 'www.killed.test';
const OTHER = 'www.other.test';
const IMAGE = 'berth-test/acme-processes:latest';

const skip =
  TEST_DATABASE !== 'postgres'
    ? 'two processes share a database only on Postgres'
    : pebbleAvailable() || process.env.CI
      ? false
      : 'needs /usr/bin/pebble and openssl';

const server = serverFixture('docker');
let dns: TestDnsServer;
let pebble: Pebble;
let store: Store;

before(async () => {
  if (skip) return;
  // The base image built, which this file's image starts from.
  await server.ready();
  dns = await startDnsServer();
  await buildImage(
    IMAGE,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo once > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
  );
});
after(async () => {
  await store?.close();
  await pebble?.close();
  await dns?.close();
});

function fetchOverHttps(port: number, name: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port,
          servername: name,
          headers: { host: name },
          ca,
          agent: false,
          timeout: 10_000,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => {
            body += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      )
      .on('error', reject);
  });
}

test('two processes and a SIGKILL between the CA making an order and Berth storing it: one order per name, both issued', {
  skip,
  timeout: 600_000,
}, async () => {
  const httpsPort = await freePort();
  pebble = await startPebble({ httpPort: server.ingressPort, dnsServer: dns.address, validitySeconds: 3600 });
  const env = {
    BERTH_PORT: '0',
    BERTH_INGRESS_BIND: '127.0.0.1',
    BERTH_INGRESS_HTTPS_PORT: String(httpsPort),
    BERTH_INGRESS_HOST: 'apps.processes.test',
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@processes.test',
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    // A killed worker's job is taken over within about a second.
    BERTH_JOB_LEASE_MS: '1000',
  };
  // The API and the ingress; the orders are the two workers'.
  const serve = await listening(server.run(['serve', '--no-workers'], env));
  const { url } = serve;
  const startWorker = async () => {
    const worker = server.run(['worker', '--concurrency', '1'], { ...env, BERTH_LOG_LEVEL: 'info' });
    await worker.waitForOutput(/worker started/);
    return worker;
  };
  const workers = [await startWorker(), await startWorker()];
  const first = await server.firstStart(serve);
  const { databaseUrl, dataDir } = server.database;
  store = await openStore({ databaseUrl, dataDir, migrate: false });
  const berth = { url, token: first.token, envUrl: first.envUrl };

  const domains = new Map<string, { id: string; domainsUrl: string }>();
  for (const [name, serviceName] of [
    [KILLED, 'Killed'],
    [OTHER, 'Other'],
  ] as const) {
    const service = await createWebService(berth, {
      name: serviceName,
      docker_image: 'berth-test/acme-processes',
    });
    await deploySuccessfully(berth, service.id, 'latest');
    const domainsUrl = `${berth.envUrl}/services/${service.id}/custom-domains`;
    const added = await api(domainsUrl, berth.token, 'POST', { domain: name });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    const created = added.body.data.custom_domain;
    for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
    dns.set(name, 'A', ['127.0.0.1']);
    domains.set(name, { id: created.id, domainsUrl });
  }

  const held = pebble.holdNextOrder(KILLED);
  for (const { id, domainsUrl } of domains.values()) {
    const verified = await api(`${domainsUrl}/${id}/verify`, berth.token, 'POST');
    assert.equal(verified.status, 200, JSON.stringify(verified.body));
  }
  await held;
  const killedId = domains.get(KILLED)?.id as string;
  const job = await store.db
    .selectFrom('jobs')
    .select('locked_by')
    .where('kind', '=', 'issue_certificate')
    .where('subject_id', '=', killedId)
    .executeTakeFirstOrThrow();
  const pid = Number(job.locked_by?.split(':')[1]);
  const victim = workers.find((w) => w.child.pid === pid);
  assert.ok(victim, `a worker holds the order's job (${job.locked_by})`);
  victim.child.kill('SIGKILL');
  await victim.exited;
  // Killed in the gap: the order's key is stored, its URL is not.
  const row = await store.db
    .selectFrom('certificates')
    .select(['order_key', 'order_url', 'status'])
    .where('custom_domain_id', '=', killedId)
    .executeTakeFirstOrThrow();
  assert.notEqual(row.order_key, null);
  assert.equal(row.order_url, null);
  assert.deepEqual(
    pebble.orders.filter((n) => n === KILLED),
    [KILLED],
    'the CA made the order',
  );
  // Two processes again, as after a restart.
  await startWorker();

  for (const [name, { domainsUrl }] of domains) {
    const certificate = await pollUntil(
      `${name}'s certificate`,
      async () => {
        const res = await api(domainsUrl, berth.token);
        const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
        const c = (active ?? pending)?.certificate;
        assert.notEqual(c?.status, 'failed', c?.last_error);
        return c?.status === 'issued' ? c : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    assert.match(certificate.issuer, /Pebble Intermediate CA/);
    const served = await pollUntil(`${name} over HTTPS`, async () => {
      const res = await fetchOverHttps(httpsPort, name, pebble.rootPem).catch(() => null);
      return res?.status === 200 ? res : undefined;
    });
    assert.equal(served.body, 'once\n');
  }
  assert.deepEqual(
    pebble.orders.filter((n) => n === KILLED),
    [KILLED],
    `${KILLED} was ordered once`,
  );
  assert.deepEqual(
    pebble.orders.filter((n) => n === OTHER),
    [OTHER],
    `${OTHER} was ordered once`,
  );
});

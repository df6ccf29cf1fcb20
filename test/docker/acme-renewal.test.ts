import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, createWebService, deploySuccessfully, freePort } from '../helpers/docker.ts';
import { type Pebble, pebbleAvailable, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { openSse, type SseReader } from '../helpers/sse.ts';
import { tlsGet } from '../helpers/tls-get.ts';

/**
 * Issue 27, done means 2: renewal against a real CA. Pebble issues certificates of two minutes; Berth
 * renews at two thirds of that (less its jitter), twice, while a client that trusts only pebble's root
 * (verifying chain and host name, a new TLS connection each time) fetches the custom domain over HTTPS
 * in a loop: no request may fail, and it must see three certificates. The certificate's events (issued,
 * renewed twice; failed for a name the CA cannot reach) arrive on the events stream.
 */
const GOOD = 'www.renew.test';
/** Resolves nowhere the ingress listens: the CA cannot validate it. */
const UNREACHABLE = 'www.unreachable.test';
const IMAGE = 'berth-test/acme-renewal:latest';
const LIFETIME_S = 120;

// CI installs pebble (.ci/run): there the test runs, or fails saying what is missing.
const skip = pebbleAvailable() || process.env.CI ? false : 'needs /usr/bin/pebble and openssl';

let dns: TestDnsServer;
let pebble: Pebble;
let server: TestServer;
let httpsPort: number;
let events: SseReader;

before(async () => {
  if (skip) return;
  dns = await startDnsServer();
  const httpPort = await freePort();
  httpsPort = await freePort();
  pebble = await startPebble({ httpPort, dnsServer: dns.address, validitySeconds: LIFETIME_S });
  server = await startTestServer('docker', {
    BERTH_INGRESS_BIND: '127.0.0.1',
    BERTH_INGRESS_PORT: String(httpPort),
    BERTH_INGRESS_HTTPS_PORT: String(httpsPort),
    BERTH_INGRESS_HOST: 'apps.renew.test',
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@renew.test',
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    BERTH_ACME_SCAN_MS: '1000',
    BERTH_ACME_RETRY_BASE_MS: '3600000',
    // The request loop's and the polls' pace is the test's, not a client's to limit.
    BERTH_RATE_LIMIT_PER_MIN: '1000000',
  });
  events = await openSse(`${server.berth.url}/v1/events`, server.token);
  await buildImage(
    IMAGE,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo renewed > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
  );
});
after(async () => {
  events?.close();
  await server?.close();
  await pebble?.close();
  await dns?.close();
});

/** A web service with `domain` verified as its custom domain, resolving to the ingress (or `address`). */
async function serviceWithDomain(name: string, domain: string, address = '127.0.0.1') {
  const berth = { url: server.berth.url, token: server.token, envUrl: server.envUrl };
  const service = await createWebService(berth, { name, docker_image: 'berth-test/acme-renewal' });
  await deploySuccessfully(berth, service.id, 'latest');
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  // What the CA resolves the name to when it validates.
  dns.set(domain, 'A', [address]);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  return { domainsUrl, domainId: created.id as string };
}

async function certificateOf(domainsUrl: string) {
  const res = await api(domainsUrl, server.token);
  const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
  return (active ?? pending)?.certificate ?? null;
}

/** One GET over a new TLS connection, trusting only pebble's root: the status, body and certificate serial. */
async function fetchOnce(): Promise<{ status: number; body: string; serial: string }> {
  const { status, body, cert } = await tlsGet({ port: httpsPort, name: GOOD, ca: pebble.rootPem });
  return { status, body, serial: cert.serialNumber };
}

test('a custom domain keeps answering over HTTPS across two renewals, with no failed request', {
  skip,
  timeout: 600_000,
}, async () => {
  const { domainsUrl, domainId } = await serviceWithDomain('Renewed', GOOD);
  const first = await pollUntil(
    'the first certificate',
    async () => {
      const c = await certificateOf(domainsUrl);
      assert.notEqual(c?.status, 'failed', c?.last_error);
      return c?.status === 'issued' ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  assert.match(first.issuer, /Pebble Intermediate CA/);
  const lifetime = Date.parse(first.not_after) - Date.parse(first.not_before);
  assert.ok(Math.abs(lifetime - LIFETIME_S * 1000) <= 2000, `a ${LIFETIME_S} s certificate (${lifetime} ms)`);
  await pollUntil('the ingress to serve it', async () =>
    (await fetchOnce().catch(() => null))?.status === 200 ? true : undefined,
  );

  // The loop: every request must succeed, through two renewals (three certificates seen).
  const serials: string[] = [];
  let requests = 0;
  const deadline = Date.now() + 5 * LIFETIME_S * 1000;
  while (serials.length < 3) {
    assert.ok(Date.now() < deadline, `two renewals within ${5 * LIFETIME_S} s (saw ${serials.length})`);
    const res = await fetchOnce();
    requests++;
    assert.equal(res.status, 200, `request ${requests} answered ${res.status}`);
    assert.equal(res.body, 'renewed\n');
    if (serials.at(-1) !== res.serial) serials.push(res.serial);
    // A visitor's pace (about 20 a second), not a load test on a machine other tests share.
    await sleep(50);
  }
  assert.ok(requests > 20, `the loop ran through the renewals (${requests} requests)`);
  assert.equal(new Set(serials).size, 3, 'three certificates, each served once its turn came');
  assert.equal((await certificateOf(domainsUrl))?.last_error, null, 'no renewal failed');
  assert.deepEqual(
    pebble.orders.filter((n) => n === GOOD),
    [GOOD, GOOD, GOOD],
    'one order per issuance',
  );

  const mine = await events.until(
    'the issued and two renewed events',
    (all) =>
      all.filter((e) => e.data?.data?.custom_domain_id === domainId && e.event !== 'certificate.failed')
        .length >= 3,
    30_000,
  );
  const certificateEvents = mine.filter((e) => e.data?.data?.custom_domain_id === domainId);
  assert.deepEqual(
    certificateEvents.map((e) => e.event),
    ['certificate.issued', 'certificate.renewed', 'certificate.renewed'],
  );
  const renewed = certificateEvents[2]?.data;
  assert.equal(renewed.type, 'certificate.renewed');
  assert.equal(renewed.data.domain, GOOD);
  assert.equal(renewed.data.status, 'issued');
  assert.match(renewed.data.issuer, /Pebble Intermediate CA/);
  assert.ok(Date.parse(renewed.data.not_after) > Date.parse(first.not_after));
  assert.equal(renewed.data.last_error, null);
});

test('a name the CA cannot validate emits certificate.failed with the reason', { skip }, async () => {
  // 127.0.0.2: nothing listens on the ingress's port there.
  const { domainsUrl, domainId } = await serviceWithDomain('Unreached', UNREACHABLE, '127.0.0.2');
  const failed = await pollUntil(
    'the order to fail',
    async () => {
      const c = await certificateOf(domainsUrl);
      return c?.status === 'failed' ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  const [event] = (
    await events.until('the failed event', (all) =>
      all.some((e) => e.event === 'certificate.failed' && e.data?.data?.custom_domain_id === domainId),
    )
  ).filter((e) => e.event === 'certificate.failed' && e.data?.data?.custom_domain_id === domainId);
  assert.equal(event?.data.data.domain, UNREACHABLE);
  assert.equal(event?.data.data.status, 'failed');
  assert.equal(event?.data.data.last_error, failed.last_error);
  assert.match(event?.data.data.last_error, /could not validate www\.unreachable\.test/);
});

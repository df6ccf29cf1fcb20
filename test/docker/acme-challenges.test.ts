import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, createWebService, deploySuccessfully, freePort } from '../helpers/docker.ts';
import { type KnotServer, knotAvailable, startKnot } from '../helpers/knot.ts';
import { type Pebble, pebbleAvailable, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { type TlsAnswer, tlsGet } from '../helpers/tls-get.ts';

/**
 * DNS-01 and TLS-ALPN-01 against a real ACME server (Debian's pebble) validating over real sockets, with
 * a real RFC 2136 server (Knot DNS) for the zone the names are in: pebble resolves every name through
 * knot, which points them at the ingress's own loopback address (ports 80 and 443). Berth writes the
 * DNS-01 TXT records to knot by UPDATE signed with TSIG; its ingress answers TLS-ALPN-01 itself. A
 * client trusting only pebble's root fetches a service's own host name (the wildcard) and a custom
 * domain (TLS-ALPN-01) over HTTPS, checking the chain and the host name.
 */
const ADDRESS = '127.0.27.2';
const ZONE = 'acme.test';
const INGRESS_HOST = `apps.${ZONE}`;
const DOMAIN = `www.shop.${ZONE}`;
/** In no zone record: the CA's TLS-ALPN-01 validation of it cannot connect. */
const NOWHERE = `www.nowhere.${ZONE}`;
const IMAGE = 'berth-test/acme-challenges-web:latest';

// CI installs pebble and knot and runs as root (.ci/run): there the test runs, or fails saying what is missing.
const skip =
  (pebbleAvailable() && knotAvailable() && process.getuid?.() === 0) || process.env.CI
    ? false
    : 'needs /usr/bin/pebble, /usr/sbin/knotd (knot, knot-dnsutils) and root';

let knot: KnotServer;
let pebble: Pebble;
let dns: TestDnsServer;
let server: TestServer;

before(async () => {
  if (skip) return;
  knot = await startKnot({
    port: await freePort(),
    zone: ZONE,
    records: [`*.apps A ${ADDRESS}`, `www.shop A ${ADDRESS}`],
    updatable: ['_acme-challenge.apps'],
  });
  // HTTP-01 validations go to a port nothing listens on: a custom domain's certificate can only come
  // by TLS-ALPN-01 (and DNS-01 only for the name knot lets Berth's key write).
  pebble = await startPebble({
    httpPort: await freePort(),
    tlsPort: 443,
    dnsServer: knot.address,
    // Certificates of 90 seconds: the wildcard renews (at two thirds) while the test runs.
    validitySeconds: 90,
  });
  dns = await startDnsServer();
  server = await startTestServer('docker', {
    BERTH_INGRESS_BIND: ADDRESS,
    BERTH_INGRESS_PORT: '80',
    BERTH_INGRESS_HTTPS_PORT: '443',
    BERTH_INGRESS_HOST: INGRESS_HOST,
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@shop.test',
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    BERTH_ACME_CHALLENGE: 'tls-alpn-01',
    BERTH_ACME_SCAN_MS: '1000',
    BERTH_ACME_DNS_SERVER: knot.address,
    BERTH_ACME_DNS_ZONE: ZONE,
    BERTH_ACME_DNS_TSIG_KEY: knot.key.name,
    BERTH_ACME_DNS_TSIG_ALGORITHM: knot.key.algorithm,
    BERTH_ACME_DNS_TSIG_SECRET: knot.key.secret,
  });
  await buildImage(
    IMAGE,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
  );
});
after(async () => {
  await server?.close();
  await dns?.close();
  await pebble?.close();
  await knot?.close();
});

const berth = () => ({ url: server.berth.url, token: server.token, envUrl: server.envUrl });

async function deployedService(name: string) {
  const service = await createWebService(berth(), { name, docker_image: 'berth-test/acme-challenges-web' });
  await deploySuccessfully(berth(), service.id, 'latest');
  return service;
}

/** GET over HTTPS to the ingress with SNI and Host `name`, trusting only `ca`: the chain and host name are checked. */
function viaHttps(name: string, ca: string): Promise<TlsAnswer> {
  return tlsGet({ host: ADDRESS, port: 443, name, ca, timeoutMs: 10_000 });
}

function rawHttp(name: string, urlPath: string): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: ADDRESS, port: 80, path: urlPath, headers: { host: name }, timeout: 10_000 }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, location: res.headers.location });
      })
      .on('error', reject);
  });
}

/** A handshake offering only `acme-tls/1`, as the CA's TLS-ALPN-01 validation does: the certificate it gets, or the error. */
function alpnHandshake(name: string): Promise<tls.PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(
      {
        host: ADDRESS,
        port: 443,
        servername: name,
        ALPNProtocols: ['acme-tls/1'],
        rejectUnauthorized: false,
      },
      () => {
        const cert = socket.getPeerCertificate();
        socket.end();
        resolve(cert);
      },
    );
    socket.on('error', reject);
  });
}

test("services' own host names are served over HTTPS by the ingress domain's wildcard, ordered by DNS-01 through RFC 2136", {
  skip,
}, async () => {
  const first = await deployedService('Wild');
  const host = `${first.subdomain}.${INGRESS_HOST}`;
  const served = await pollUntil(
    'the service to answer over HTTPS',
    async () => {
      const res = await viaHttps(host, pebble.rootPem).catch(() => undefined);
      return res?.status === 200 ? res : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  assert.equal(served.body, 'hello\n');
  assert.equal(
    served.cert.subjectaltname,
    `DNS:*.${INGRESS_HOST}`,
    'one wildcard certificate, not one per service',
  );
  assert.match(String(served.cert.issuer.CN), /Pebble/);
  assert.equal(
    served.headers['strict-transport-security'],
    undefined,
    'HSTS is opt-in per service (ops.json ingress.hsts_max_age)',
  );
  assert.deepEqual(await rawHttp(host, '/x?y=1'), { status: 308, location: `https://${host}/x?y=1` });
  assert.deepEqual(
    knot.txt(`_acme-challenge.${INGRESS_HOST}`),
    [],
    'the TXT record is taken down after validation',
  );

  // A service created later is HTTPS as soon as it is routed: no order of its own.
  const second = await deployedService('Tame');
  const later = await pollUntil('the second service to answer over HTTPS', async () => {
    const res = await viaHttps(`${second.subdomain}.${INGRESS_HOST}`, pebble.rootPem).catch(() => undefined);
    return res?.status === 200 ? res : undefined;
  });
  assert.equal(later.cert.fingerprint256, served.cert.fingerprint256, 'the same certificate');

  // The wildcard renews at two thirds of its 90 seconds: the new certificate takes over, and not one
  // request fails meanwhile.
  const renewed = await pollUntil(
    'the wildcard to be renewed',
    async () => {
      const res = await viaHttps(host, pebble.rootPem);
      assert.equal(res.status, 200);
      return res.cert.fingerprint256 !== served.cert.fingerprint256 ? res : undefined;
    },
    { timeoutMs: 150_000, intervalMs: 200 },
  );
  assert.equal(renewed.cert.subjectaltname, `DNS:*.${INGRESS_HOST}`);
  assert.ok(Date.parse(renewed.cert.valid_to) > Date.parse(served.cert.valid_to), 'a later expiry');
  assert.deepEqual(
    knot.txt(`_acme-challenge.${INGRESS_HOST}`),
    [],
    'the renewal took its TXT record down too',
  );

  // A client that does not trust the test CA refuses it.
  await assert.rejects(
    new Promise((resolve, reject) => {
      https
        .get(
          { host: ADDRESS, port: 443, servername: host, headers: { host }, timeout: 10_000, agent: false },
          resolve,
        )
        .on('error', reject);
    }),
    /self[- ]signed|unable to (get|verify)|issuer/i,
  );
});

/** A deployed web service with `domain` verified as its custom domain; the domain's certificate once `wanted`. */
async function certificateOfDomain(name: string, domain: string, wanted: 'issued' | 'failed') {
  const service = await deployedService(name);
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  return pollUntil(
    `the certificate of ${domain} to be ${wanted}`,
    async () => {
      const res = await api(domainsUrl, server.token);
      const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
      const c = (active ?? pending)?.certificate;
      if (wanted === 'issued') assert.notEqual(c?.status, 'failed', c?.last_error);
      return c?.status === wanted ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

test('a custom domain gets its certificate by TLS-ALPN-01, answered by the ingress itself', {
  skip,
}, async () => {
  const certificate = await certificateOfDomain('Shop', DOMAIN, 'issued');
  assert.match(certificate.issuer, /Pebble/);
  const served = await pollUntil('the domain to answer over HTTPS', async () => {
    const res = await viaHttps(DOMAIN, pebble.rootPem).catch(() => undefined);
    return res?.status === 200 ? res : undefined;
  });
  assert.equal(served.body, 'hello\n');
  assert.equal(served.cert.subjectaltname, `DNS:${DOMAIN}`);
  // The challenge's certificate was for the CA's handshake alone: with the order done there is none to give.
  await assert.rejects(alpnHandshake(DOMAIN));
});

test('a TLS-ALPN-01 validation that fails says so and what to check; the domain stays on HTTP', {
  skip,
}, async () => {
  const certificate = await certificateOfDomain('Nowhere', NOWHERE, 'failed');
  assert.match(
    certificate.last_error,
    /^The CA could not validate www\.nowhere\.acme\.test over TLS-ALPN-01: /,
  );
  assert.match(certificate.last_error, /port 443 reaches BERTH_INGRESS_HTTPS_PORT/);
  assert.equal(certificate.not_after, null);
  await assert.rejects(viaHttps(NOWHERE, pebble.rootPem), 'no certificate: no TLS for the name');
  const plain = await pollUntil('the domain to answer over HTTP', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      http
        .get({ host: ADDRESS, port: 80, path: '/', headers: { host: NOWHERE }, timeout: 10_000 }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => {
            body += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });
    return res.status === 200 ? res : undefined;
  });
  assert.equal(plain.body, 'hello\n');
});

test('a DNS update the server refuses fails the wildcard with the reason, and services stay on HTTP', {
  skip,
}, async () => {
  const address = '127.0.27.3';
  const wrongSecret = Buffer.alloc(32, 9).toString('base64');
  const other = await startTestServer('docker', {
    BERTH_INGRESS_BIND: address,
    BERTH_INGRESS_PORT: '80',
    BERTH_INGRESS_HTTPS_PORT: '443',
    BERTH_INGRESS_HOST: INGRESS_HOST,
    BERTH_ACME_DIRECTORY_URL: pebble.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@shop.test',
    BERTH_ACME_CA_FILE: pebble.listenerCertFile,
    BERTH_ACME_DNS_SERVER: knot.address,
    BERTH_ACME_DNS_ZONE: ZONE,
    BERTH_ACME_DNS_TSIG_KEY: knot.key.name,
    BERTH_ACME_DNS_TSIG_SECRET: wrongSecret,
  });
  try {
    const [line] = await other.berth.waitForOutput(/.*the wildcard certificate failed.*/, 120_000);
    const logged = JSON.parse(line) as {
      name: string;
      failures: number;
      retry_in_ms: number;
      reason: string;
    };
    assert.equal(logged.name, `*.${INGRESS_HOST}`);
    assert.equal(logged.failures, 1);
    assert.equal(logged.retry_in_ms, 3_600_000, 'a failed name waits an hour (BERTH_ACME_RETRY_BASE_MS)');
    assert.match(
      logged.reason,
      /refused the update of _acme-challenge\.apps\.acme\.test in acme\.test: BADSIG \(the TSIG secret or algorithm does not match/,
    );
    const output = `${other.berth.stdout()}${other.berth.stderr()}`;
    assert.ok(!output.includes(wrongSecret), 'the TSIG secret is never logged');
    // No certificate: plain HTTP is answered, not redirected, and there is no TLS for services' names.
    const plain = await rawHttpAt(address, `any.${INGRESS_HOST}`);
    assert.equal(plain, 404);
    await assert.rejects(
      new Promise((resolve, reject) => {
        tls
          .connect(
            { host: address, port: 443, servername: `any.${INGRESS_HOST}`, rejectUnauthorized: false },
            () => resolve(undefined),
          )
          .on('error', reject);
      }),
    );
  } finally {
    await other.close();
  }
});

function rawHttpAt(address: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: address, port: 80, path: '/', headers: { host }, timeout: 10_000 }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

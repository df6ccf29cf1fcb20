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
    validitySeconds: 86_400,
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
function viaHttps(
  name: string,
  ca: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders; cert: tls.PeerCertificate }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      {
        host: ADDRESS,
        port: 443,
        servername: name,
        headers: { host: name },
        ca,
        path: '/',
        timeout: 10_000,
        agent: false,
      },
      (res) => {
        const cert = (res.socket as tls.TLSSocket).getPeerCertificate();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, cert }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
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
  assert.equal(served.headers['strict-transport-security'], 'max-age=31536000');
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

test('a custom domain gets its certificate by TLS-ALPN-01, answered by the ingress itself', {
  skip,
}, async () => {
  const service = await deployedService('Shop');
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain: DOMAIN });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  const certificate = await pollUntil(
    'the certificate to be issued',
    async () => {
      const res = await api(domainsUrl, server.token);
      const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
      const c = (active ?? pending)?.certificate;
      assert.notEqual(c?.status, 'failed', c?.last_error);
      return c?.status === 'issued' ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
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

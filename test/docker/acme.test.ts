import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { after, before, test } from 'node:test';
import { type AcmeServer, caddyAvailable, startAcmeServer } from '../helpers/acme-server.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import {
  BASE_IMAGE,
  buildImage,
  createWebService,
  deploySuccessfully,
  freePort,
  viaIngress,
} from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * Custom domains get certificates by ACME (HTTP-01) from a real ACME server (caddy's acme_server, its own
 * root CA) validating over real sockets: the ingress runs on port 80 and 443 of a loopback address of
 * its own, which the CA resolves the test's names to. A client that trusts only the test CA's root then
 * fetches the domain over HTTPS, checking the chain and the host name.
 */
const ADDRESS = '127.0.27.1';
const PUBLIC_HOST = 'apps.acme.test';
const GOOD = 'www.shop.test';
/** Not among the names the CA resolves to the ingress: its validation fails. */
const UNREACHABLE = 'www.elsewhere.test';
const IMAGE = 'berth-test/acme-web:latest';

// CI installs caddy and runs as root (.ci/run): there the test runs, or fails saying what is missing.
const skip = caddyAvailable() || process.env.CI ? false : 'needs /usr/bin/caddy, unshare and root';

let acmeServer: AcmeServer;
let dns: TestDnsServer;
let server: TestServer;

before(async () => {
  if (skip) return;
  acmeServer = await startAcmeServer({ address: ADDRESS, port: await freePort(), names: [GOOD] });
  dns = await startDnsServer();
  server = await startTestServer('docker', {
    BERTH_INGRESS_BIND: ADDRESS,
    BERTH_INGRESS_PORT: '80',
    BERTH_INGRESS_HTTPS_PORT: '443',
    BERTH_INGRESS_HOST: PUBLIC_HOST,
    BERTH_DNS_SERVERS: dns.address,
    BERTH_ACME_DIRECTORY_URL: acmeServer.directoryUrl,
    BERTH_ACME_EMAIL: 'ops@shop.test',
    BERTH_ACME_CA_FILE: acmeServer.rootFile,
  });
  await buildImage(
    IMAGE,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
  );
});
after(async () => {
  await server?.close();
  await dns?.close();
  await acmeServer?.close();
});

/** A web service with `domain` verified as its custom domain; the domain's URL. */
async function serviceWithDomain(name: string, domain: string) {
  const berth = { url: server.berth.url, token: server.token, envUrl: server.envUrl };
  const service = await createWebService(berth, { name, docker_image: 'berth-test/acme-web' });
  await deploySuccessfully(berth, service.id, 'latest');
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  assert.equal(created.certificate, null, 'no certificate before the domain is verified');
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  return { service, url: `${domainsUrl}/${created.id}`, domainsUrl };
}

async function certificateOf(domainsUrl: string) {
  const res = await api(domainsUrl, server.token);
  const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
  return (active ?? pending)?.certificate ?? null;
}

/** GET over HTTPS to the ingress, with SNI and Host `name`, trusting only `ca`. */
function viaHttps(
  name: string,
  ca: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      { host: ADDRESS, port: 443, servername: name, headers: { host: name }, ca, path: '/', timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
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

test('a verified custom domain gets a certificate by HTTP-01 and is served over HTTPS', {
  skip,
}, async () => {
  const { service, domainsUrl } = await serviceWithDomain('Shop', GOOD);
  const certificate = await pollUntil(
    'the certificate to be issued',
    async () => {
      const c = await certificateOf(domainsUrl);
      assert.notEqual(c?.status, 'failed', c?.last_error);
      return c?.status === 'issued' ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  assert.match(certificate.issuer, /Caddy Local Authority/);
  assert.equal(certificate.last_error, null);
  const notBefore = Date.parse(certificate.not_before);
  const notAfter = Date.parse(certificate.not_after);
  const renewAfter = Date.parse(certificate.renew_after);
  const lifetime = notAfter - notBefore;
  assert.ok(
    renewAfter <= notBefore + (lifetime * 2) / 3,
    'renewal at two thirds of the lifetime at the latest',
  );
  assert.ok(
    renewAfter >= notBefore + (lifetime * 2) / 3 - lifetime / 30,
    'less at most a thirtieth of jitter',
  );

  // The client trusts only the test CA's root: the chain and the host name are checked.
  const served = await pollUntil('the domain to answer over HTTPS', async () => {
    const res = await viaHttps(GOOD, acmeServer.rootPem);
    return res.status === 200 ? res : undefined;
  });
  assert.equal(served.body, 'hello\n');
  assert.equal(
    served.headers['strict-transport-security'],
    undefined,
    'HSTS is opt-in per service (ops.json ingress.hsts_max_age)',
  );
  await assert.rejects(
    new Promise((resolve, reject) => {
      https
        .get(
          { host: ADDRESS, port: 443, servername: GOOD, headers: { host: GOOD }, timeout: 10_000 },
          resolve,
        )
        .on('error', reject);
    }),
    /self[- ]signed|unable to (get|verify)/i,
    'a client that does not trust the test CA refuses the certificate',
  );

  // Over HTTP the name now redirects to HTTPS; the service's own host name, without a certificate, does not.
  assert.deepEqual(await rawHttp(GOOD, '/a?b=1'), { status: 308, location: `https://${GOOD}/a?b=1` });
  const plain = await viaIngress(80, `${service.subdomain}.${PUBLIC_HOST}`, '/', ADDRESS);
  assert.deepEqual(plain, { status: 200, body: 'hello\n' });
  assert.equal((await rawHttp(GOOD, '/.well-known/acme-challenge/unknown-token')).status, 404);
});

test('a name the CA cannot validate fails with the reason, waits, and stays served over HTTP', {
  skip,
}, async () => {
  const { domainsUrl } = await serviceWithDomain('Elsewhere', UNREACHABLE);
  const certificate = await pollUntil(
    'the order to fail',
    async () => {
      const c = await certificateOf(domainsUrl);
      return c?.status === 'failed' ? c : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  assert.match(
    certificate.last_error,
    new RegExp(`could not validate ${UNREACHABLE.replaceAll('.', '\\.')}`),
  );
  assert.match(certificate.last_error, /resolves to the ingress/);
  assert.equal(certificate.not_after, null);
  await pollUntil('the domain to route over HTTP', async () => {
    const res = await viaIngress(80, UNREACHABLE, '/', ADDRESS);
    return res.status === 200 ? res : undefined;
  });
  await assert.rejects(viaHttps(UNREACHABLE, acmeServer.rootPem), 'no certificate: no TLS for the name');
});

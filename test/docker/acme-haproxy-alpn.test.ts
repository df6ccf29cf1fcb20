import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, createWebService, deploySuccessfully, freePort } from '../helpers/docker.ts';
import { haproxyAcmeSettings, haproxyAcmeSkip, type Pebble, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { h2Get, tlsGet } from '../helpers/tls-get.ts';

/**
 * BERTH_INGRESS_PROXY=haproxy with BERTH_ACME_CHALLENGE=tls-alpn-01 on the docker provider, against a
 * real CA (pebble): its validations reach HAProxy's HTTPS port (HTTP-01 ones a port nothing listens on,
 * so the certificate can only come by TLS-ALPN-01), which passes them to Berth's own responder. The
 * issued certificate is then served by HAProxy over HTTP/1.1 and HTTP/2 to clients that trust only
 * pebble's root and check the name.
 */
const DOMAIN = 'www.alpn-haproxy.test';
const IMAGE = 'berth-test/acme-haproxy-alpn';

const skip = haproxyAcmeSkip();

let dns: TestDnsServer;
let pebble: Pebble;
let server: TestServer;
let httpsPort: number;

before(async () => {
  if (skip) return;
  dns = await startDnsServer();
  httpsPort = await freePort();
  pebble = await startPebble({
    httpPort: await freePort(),
    tlsPort: httpsPort,
    dnsServer: dns.address,
    validitySeconds: 3600,
  });
  server = await startTestServer('docker', {
    ...haproxyAcmeSettings('alpn-haproxy.test', { pebble, dnsServer: dns.address, httpsPort }),
    BERTH_INGRESS_PORT: String(await freePort()),
    BERTH_ACME_CHALLENGE: 'tls-alpn-01',
  });
  await buildImage(
    `${IMAGE}:latest`,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo alpn > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
  );
});
after(async () => {
  await server?.close();
  await pebble?.close();
  await dns?.close();
});

test('a custom domain gets its certificate by TLS-ALPN-01 through HAProxy, served over HTTP/1.1 and HTTP/2', {
  skip,
  timeout: 300_000,
}, async () => {
  const berth = { url: server.berth.url, token: server.token, envUrl: server.envUrl };
  const service = await createWebService(berth, { name: 'Alpn', docker_image: IMAGE });
  await deploySuccessfully(berth, service.id, 'latest');
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain: DOMAIN });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  dns.set(DOMAIN, 'A', ['127.0.0.1']);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  const certificate = await pollUntil(
    'the certificate to be issued',
    async () => {
      const read = await api(domainsUrl, server.token);
      const { active_domain: active, pending_domain: pending } = read.body.data.custom_domain;
      const cert = (active ?? pending)?.certificate;
      assert.notEqual(cert?.status, 'failed', cert?.last_error);
      return cert?.status === 'issued' ? cert : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
  assert.match(certificate.issuer, /Pebble/);
  assert.deepEqual(pebble.orders, [DOMAIN]);
  const answer = await pollUntil(
    'HAProxy to serve the issued certificate',
    async () => {
      const res = await tlsGet({ port: httpsPort, name: DOMAIN, ca: pebble.rootPem }).catch(() => null);
      return res?.status === 200 ? res : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  assert.equal(answer.body, 'alpn\n');
  assert.equal(answer.cert.subjectaltname, `DNS:${DOMAIN}`);
  const h2 = await h2Get({ url: `https://127.0.0.1:${httpsPort}`, name: DOMAIN, ca: pebble.rootPem });
  assert.deepEqual(
    { status: h2.status, alpn: h2.alpn, body: h2.body },
    { status: 200, alpn: 'h2', body: 'alpn\n' },
  );
});

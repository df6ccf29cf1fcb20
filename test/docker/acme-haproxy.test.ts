import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, createWebService, deploySuccessfully, freePort } from '../helpers/docker.ts';
import { haproxyAcmeSettings, haproxyAcmeSkip, type Pebble, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { tlsGet } from '../helpers/tls-get.ts';

/**
 * BERTH_INGRESS_PROXY=haproxy on the docker provider, against a real CA (pebble) and a real HAProxy:
 * a custom domain's certificate is issued (HTTP-01, answered by Berth's Node ingress on the HTTP port)
 * and served by HAProxy to a client that trusts only pebble's root and checks the name; plain HTTP
 * redirects; a new deployment takes the traffic; a renewal is served with no failed request.
 */
const DOMAIN = 'www.haproxy.test';
const IMAGE = 'berth-test/acme-haproxy';
const LIFETIME_S = 90;

const skip = haproxyAcmeSkip();

let dns: TestDnsServer;
let pebble: Pebble;
let server: TestServer;
let httpPort: number;
let httpsPort: number;

before(async () => {
  if (skip) return;
  dns = await startDnsServer();
  httpPort = await freePort();
  httpsPort = await freePort();
  pebble = await startPebble({ httpPort, dnsServer: dns.address, validitySeconds: LIFETIME_S });
  server = await startTestServer('docker', {
    ...haproxyAcmeSettings('haproxy.test', { pebble, dnsServer: dns.address, httpsPort }),
    BERTH_INGRESS_PORT: String(httpPort),
  });
  for (const version of ['one', 'two']) {
    await buildImage(
      `${IMAGE}:${version}`,
      `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www && echo ${version} > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`,
    );
  }
});
after(async () => {
  await server?.close();
  await pebble?.close();
  await dns?.close();
});

/** One GET over a new TLS connection, trusting only pebble's root: the status, body and certificate serial. */
async function fetchOnce(): Promise<{ status: number; body: string; serial: string }> {
  const { status, body, cert } = await tlsGet({ port: httpsPort, name: DOMAIN, ca: pebble.rootPem });
  return { status, body, serial: cert.serialNumber };
}

let serviceId: string;

test('HAProxy serves a custom domain with its ACME certificate, and plain HTTP redirects to it', {
  skip,
  timeout: 300_000,
}, async () => {
  const berth = { url: server.berth.url, token: server.token, envUrl: server.envUrl };
  const service = await createWebService(berth, { name: 'Proxied', docker_image: IMAGE });
  serviceId = service.id;
  await deploySuccessfully(berth, service.id, 'one');
  const domainsUrl = `${server.envUrl}/services/${service.id}/custom-domains`;
  const added = await api(domainsUrl, server.token, 'POST', { domain: DOMAIN });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const created = added.body.data.custom_domain;
  for (const r of created.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  dns.set(DOMAIN, 'A', ['127.0.0.1']);
  const verified = await api(`${domainsUrl}/${created.id}/verify`, server.token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  const answer = await pollUntil(
    'HAProxy to serve the issued certificate',
    async () => {
      const res = await fetchOnce().catch(() => null);
      return res?.status === 200 ? res : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  assert.equal(answer.body, 'one\n');

  const redirect = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http
      .get(
        { host: '127.0.0.1', port: httpPort, path: '/x', headers: { host: DOMAIN }, agent: false },
        resolve,
      )
      .on('error', reject);
  });
  redirect.resume();
  assert.equal(redirect.statusCode, 308);
  assert.equal(redirect.headers.location, `https://${DOMAIN}:${httpsPort}/x`);
});

test('a new deployment takes the traffic, and a renewed certificate is served, with no failed request', {
  skip,
  timeout: 400_000,
}, async () => {
  const berth = { url: server.berth.url, token: server.token, envUrl: server.envUrl };
  const first = await fetchOnce();
  const bodies = new Set<string>();
  const serials = new Set<string>([first.serial]);
  let requests = 0;
  let deploying: Promise<string> | null = null;
  const deadline = Date.now() + 4 * LIFETIME_S * 1000;
  while (!bodies.has('two\n') || serials.size < 2) {
    assert.ok(Date.now() < deadline, `the new deployment and a renewal within ${4 * LIFETIME_S} s`);
    const res = await fetchOnce();
    requests++;
    assert.equal(
      res.status,
      200,
      `request ${requests} answered ${res.status} ${res.body} (seen so far: ${[...bodies]}, ${serials.size} certificates)`,
    );
    bodies.add(res.body);
    serials.add(res.serial);
    deploying ??= deploySuccessfully(berth, serviceId, 'two');
    await sleep(50);
  }
  await deploying;
  assert.deepEqual([...bodies].sort(), ['one\n', 'two\n']);
});

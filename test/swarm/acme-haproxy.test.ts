import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { freePort } from '../helpers/docker.ts';
import { haproxyAcmeSettings, haproxyAcmeSkip, type Pebble, startPebble } from '../helpers/pebble.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';
import { startSwarm, type TestSwarm } from '../helpers/swarm.ts';
import { h2Get, tlsGet } from '../helpers/tls-get.ts';

/**
 * BERTH_INGRESS_PROXY=haproxy on the swarm provider, against a real CA (pebble) and a real HAProxy: a
 * custom domain's certificate is issued (HTTP-01, answered by Berth's Node ingress on the HTTP port) and
 * served by HAProxy, over HTTP/1.1 and HTTP/2, from the service's replicas on both nodes of a 2-node
 * swarm, to clients that trust only pebble's root and check the name; plain HTTP redirects; a new
 * deployment (the swarm's rolling update) takes the traffic with no failed request.
 */
const DOMAIN = 'www.swarm-haproxy.test';

const skip = haproxyAcmeSkip();

const server = serverFixture('swarm');
let swarm: TestSwarm;
let dns: TestDnsServer;
let pebble: Pebble;
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let httpsPort: number;
let image: string;

const page = (version: string) =>
  'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n' +
  `CMD ["/bin/sh", "-c", "mkdir -p /www && echo \\"${version} from $(hostname)\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]\n`;

before(
  async () => {
    if (skip) return;
    await server.ready();
    swarm = await startSwarm(2);
    image = await swarm.pushImage('berth-swarm/haproxy-web', page('one'));
    dns = await startDnsServer();
    httpsPort = await freePort();
    pebble = await startPebble({
      httpPort: server.ingressPort,
      dnsServer: dns.address,
      validitySeconds: 3600,
    });
    ({ berth, token, envUrl } = await server.start({
      DOCKER_HOST: swarm.dockerHost,
      BERTH_SWARM_MONITOR_S: '1',
      BERTH_ALLOWED_REGISTRIES: swarm.registry,
      ...haproxyAcmeSettings('swarm-haproxy.test', { pebble, dnsServer: dns.address, httpsPort }),
    }));
  },
  { timeout: 900_000 },
);
after(async () => {
  await pebble?.close();
  await dns?.close();
  await swarm?.down();
});

const fetchOnce = () => tlsGet({ port: httpsPort, name: DOMAIN, ca: pebble.rootPem });

async function deploy(serviceId: string) {
  const res = await api(`${envUrl}/services/${serviceId}/deploy`, token, 'POST', {});
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const end = await deploymentEnd(berth.url, token, res.body.data.deployment_id, 300_000);
  assert.equal(end.state, 'success', end.failure_reason);
}

let serviceId: string;

test("HAProxy serves a swarm service's custom domain with its ACME certificate from both nodes, over HTTP/1.1 and HTTP/2", {
  skip,
  timeout: 600_000,
}, async () => {
  const [registry, name] = [image.split('/')[0], image.slice(image.indexOf('/') + 1).replace(/:latest$/, '')];
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Proxied',
    source: 'docker_image',
    docker_registry: registry,
    docker_image: name,
    type: 'web',
    port: 8080,
    replica_count: 2,
    cpu_count_min: 0.1,
    memory_mb_min: 16,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  serviceId = created.body.data.service.id;
  await deploy(serviceId);
  const domainsUrl = `${envUrl}/services/${serviceId}/custom-domains`;
  const added = await api(domainsUrl, token, 'POST', { domain: DOMAIN });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const domain = added.body.data.custom_domain;
  for (const r of domain.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  dns.set(DOMAIN, 'A', ['127.0.0.1']);
  const verified = await api(`${domainsUrl}/${domain.id}/verify`, token, 'POST');
  assert.equal(verified.status, 200, JSON.stringify(verified.body));
  const hosts = await pollUntil(
    'HAProxy to serve the issued certificate from both replicas',
    async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 6; i++) {
        const res = await fetchOnce().catch(() => null);
        if (res?.status !== 200) return undefined;
        assert.match(res.body, /^one from /);
        assert.equal(res.cert.subjectaltname, `DNS:${DOMAIN}`);
        seen.add(res.body);
      }
      return seen.size === 2 ? seen : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 250 },
  );
  assert.equal(hosts.size, 2);
  const h2 = await h2Get({ url: `https://127.0.0.1:${httpsPort}`, name: DOMAIN, ca: pebble.rootPem });
  assert.equal(h2.status, 200);
  assert.match(h2.body, /^one from /);

  const redirect = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http
      .get(
        { host: '127.0.0.1', port: server.ingressPort, path: '/x', headers: { host: DOMAIN }, agent: false },
        resolve,
      )
      .on('error', reject);
  });
  redirect.resume();
  assert.equal(redirect.statusCode, 308);
  assert.equal(redirect.headers.location, `https://${DOMAIN}:${httpsPort}/x`);
});

test('a new deployment on the swarm takes the traffic through HAProxy with no failed request', {
  skip,
  timeout: 600_000,
}, async () => {
  // The image's next `latest`: a deployment resolves the tag to its digest again.
  await swarm.pushImage('berth-swarm/haproxy-web', page('two'));
  let requests = 0;
  let looping = true;
  const failures: string[] = [];
  const bodies = new Set<string>();
  const loop = (async () => {
    while (looping) {
      const res = await fetchOnce().catch((err: Error) => ({ status: 0, body: err.message }));
      requests++;
      if (res.status !== 200) failures.push(`${res.status} ${res.body}`);
      else bodies.add(res.body.split(' ')[0] as string);
      await sleep(50);
    }
  })();
  try {
    await deploy(serviceId);
    await pollUntil('the new version to answer', async () => (bodies.has('two') ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
  } finally {
    looping = false;
    await loop;
  }
  assert.deepEqual(failures, [], `${failures.length} of ${requests} requests failed`);
});

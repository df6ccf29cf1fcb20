import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { BASE_IMAGE, buildImage, viaIngress } from '../helpers/docker.ts';
import { pollUntil } from '../helpers/poll.ts';
import { api, type BerthProcess, deploymentEnd } from '../helpers/process.ts';
import { serverFixture } from '../helpers/server.ts';

/** The ingress honours ops.json (ip_whitelist, request_body_size, read_timeout) and routes active custom domains. */
const server = serverFixture('docker');
let dns: TestDnsServer;
let berth: BerthProcess & { url: string };
let token: string;
let envUrl: string;
let ingressPort: number;

const IMAGE = 'berth-test/slow:latest';
const PUBLIC_HOST = 'apps.localhost';

before(async () => {
  dns = await startDnsServer();
  // httpd with a CGI script that answers after three seconds.
  await buildImage(
    IMAGE,
    `FROM ${BASE_IMAGE}\nCMD ["/bin/sh", "-c", "mkdir -p /www/cgi-bin && echo fast > /www/index.html && printf '#!/bin/sh\\\\nsleep 3\\\\nprintf \\"Content-Type: text/plain\\\\\\\\r\\\\\\\\n\\\\\\\\r\\\\\\\\nslow\\"\\\\n' > /www/cgi-bin/slow && chmod +x /www/cgi-bin/slow && exec httpd -f -p 8080 -h /www"]\n`,
  );
  ({ berth, token, envUrl } = await server.start({
    // As behind a TLS proxy on 443 that passes Host on: origins and DNS records name the public address.
    BERTH_PUBLIC_URL: `https://${PUBLIC_HOST}`,
    BERTH_DNS_SERVERS: dns.address,
    // The API on an address of its own: the ingress must not follow it there.
    BERTH_HOST: '127.0.0.2',
  }));
  ingressPort = server.ingressPort;
});
after(() => dns?.close());

async function webService(name: string, ingress: Record<string, unknown>) {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name,
    source: 'docker_image',
    docker_image: 'berth-test/slow',
    type: 'web',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    ops_json: JSON.stringify({ ingress }),
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const service = created.body.data.service as { id: string; subdomain: string; origin: string };
  assert.equal(service.origin, `https://${service.subdomain}.${PUBLIC_HOST}`);
  const res = await api(`${envUrl}/services/${service.id}/deploy`, token, 'POST', {});
  const deployment = await deploymentEnd(berth.url, token, res.body.data.deployment_id, 90_000);
  assert.equal(deployment.state, 'success', deployment.failure_reason);
  return service;
}

function post(host: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: ingressPort,
        path: '/',
        method: 'POST',
        headers: { host, 'content-length': body.length },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('behind a proxy (BERTH_PUBLIC_URL), the environment names the public ingress host', async () => {
  const env = (await api(envUrl, token)).body.data;
  assert.equal(env.ingress_host, PUBLIC_HOST);
  assert.equal(env.environment.ingress_url, undefined, 'the environment keeps the spec shape');
});

test('ip_whitelist: an address outside it gets 403', async () => {
  const closed = await webService('Closed Door', { ip_whitelist: ['203.0.113.0/24'] });
  const res = await viaIngress(ingressPort, `${closed.subdomain}.${PUBLIC_HOST}`);
  assert.equal(res.status, 403);
});

test('request_body_size, read_timeout, and a custom domain that routes once deployed', async () => {
  const open = await webService('Open Door', {
    ip_whitelist: ['127.0.0.0/8', '::1'],
    request_body_size: 1,
    read_timeout: 1,
  });
  const host = `${open.subdomain}.${PUBLIC_HOST}`;
  assert.deepEqual(await viaIngress(ingressPort, host), { status: 200, body: 'fast\n' });
  assert.equal(await post(host, Buffer.alloc(2 * 1024 * 1024, 'x')), 413, 'over 1 MB');
  assert.equal(
    (await viaIngress(ingressPort, host, '/cgi-bin/slow')).status,
    504,
    'slower than read_timeout',
  );

  const domainUrl = `${envUrl}/services/${open.id}/custom-domains`;
  const added = await api(domainUrl, token, 'POST', { domain: 'www.open-door.test' });
  assert.equal(added.status, 200, JSON.stringify(added.body));
  const domain = added.body.data.custom_domain;
  const route = domain.dns_records.find((r: { purpose: string }) => r.purpose === 'route_app_traffic');
  assert.equal(route.record_value, PUBLIC_HOST, 'traffic is routed to the public ingress address');
  assert.equal(
    (await viaIngress(ingressPort, 'www.open-door.test')).status,
    404,
    'not routed before it is deployed',
  );
  for (const r of domain.dns_records) dns.set(r.record_name, r.record_type, [r.record_value]);
  assert.equal((await api(`${domainUrl}/${domain.id}/verify`, token, 'POST')).status, 200);
  await pollUntil('the domain to route', async () => {
    const res = await viaIngress(ingressPort, 'www.open-door.test');
    return res.status === 200 ? res.body : undefined;
  });
  const service = (await api(`${envUrl}/services/${open.id}`, token)).body.data.service;
  assert.equal(service.origin, 'https://www.open-door.test');
  assert.equal(domain.origin, 'https://www.open-door.test');
});

test('an internal service is reached inside the environment network by kube_svc_alias, never through the ingress', async () => {
  const created = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Inner Api',
    source: 'docker_image',
    docker_image: 'berth-test/slow',
    type: 'internal',
    port: 8080,
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const internal = created.body.data.service as { id: string; subdomain: string };
  const deployed = await api(`${envUrl}/services/${internal.id}/deploy`, token, 'POST', {});
  assert.equal(
    (await deploymentEnd(berth.url, token, deployed.body.data.deployment_id, 90_000)).state,
    'success',
  );
  const alias = (await api(`${envUrl}/services/${internal.id}`, token)).body.data.svc_alias as string;
  assert.match(alias, new RegExp(`^${internal.subdomain}\\.env-[0-9a-f]{8}\\.svc\\.cluster\\.local$`));
  assert.equal((await viaIngress(ingressPort, `${internal.subdomain}.${PUBLIC_HOST}`)).status, 404);

  // A job in the same environment fetches it by alias: success means the page came back.
  const job = await api(`${envUrl}/services`, token, 'POST', {
    name: 'Caller',
    source: 'docker_image',
    docker_image: 'berth-test/slow',
    type: 'job',
    replica_count: 1,
    cpu_count_min: 0.25,
    memory_mb_min: 32,
    run_command: `wget -q -O- http://${alias}:8080/ | grep -qx fast`,
  });
  const run = await api(`${envUrl}/services/${job.body.data.service.id}/deploy`, token, 'POST', {});
  const end = await deploymentEnd(berth.url, token, run.body.data.deployment_id, 90_000);
  assert.equal(end.state, 'success', end.failure_reason);
});

test('the ingress listens on BERTH_INGRESS_BIND (loopback by default), not BERTH_HOST, and serves neither /v1 nor /admin/v1', async () => {
  assert.match(berth.url, /^http:\/\/127\.0\.0\.2:/, 'the API listens on BERTH_HOST');
  await assert.rejects(viaIngress(ingressPort, 'localhost', '/', '127.0.0.2'), /ECONNREFUSED/);
  for (const path of ['/v1/environments', '/admin/v1/accounts', '/health']) {
    const res = await viaIngress(ingressPort, '127.0.0.1', path);
    assert.equal(res.status, 404, path);
    assert.match(res.body, /^no service at/, path);
  }
});

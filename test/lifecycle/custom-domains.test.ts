import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { findCertificate, queueDueCertificates } from '../../src/store/repositories/certificates.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { type Harness, startHarness, type Tenant, VALID_SERVICE } from '../helpers/harness.ts';
import { pollUntil } from '../helpers/poll.ts';

/** Custom domains against a real DNS server on a loopback port (BERTH_DNS_SERVERS points at it). */
let dns: TestDnsServer;
let h: Harness;
let t: Tenant;
let ingressHost: string;
before(async () => {
  dns = await startDnsServer();
  // Webhooks to a receiver on loopback: the certificate events' deliveries.
  h = await startHarness({ dnsServers: [dns.address], webhookAllowPrivate: true });
  await h.startWorker();
  t = await h.tenant();
  ingressHost = (await h.request('GET', `/v1/environments/${t.envId}`, { token: t.token })).body.data
    .ingress_host;
});
after(async () => {
  await h.close();
  await dns.close();
});

interface Record {
  purpose: string;
  record_name: string;
  record_type: 'A' | 'CNAME';
  record_value: string;
}

async function newService(tenant = t, body: object = VALID_SERVICE.docker) {
  const res = await h.request('POST', `/v1/environments/${tenant.envId}/services`, {
    token: tenant.token,
    body,
  });
  assert.equal(res.status, 200, res.raw);
  return `/v1/environments/${tenant.envId}/services/${res.body.data.service.id}`;
}

async function addDomain(serviceUrl: string, domain: string, tenant = t) {
  const res = await h.request('POST', `${serviceUrl}/custom-domains`, {
    token: tenant.token,
    body: { domain },
  });
  assert.equal(res.status, 200, res.raw);
  return res.body.data.custom_domain as { id: string; state: string; domain: string; dns_records: Record[] };
}

/** Publishes the records as a careful user would, but in another case and with the root's dot. */
function publish(records: Record[]) {
  for (const r of records) dns.set(r.record_name, r.record_type, [`${r.record_value.toUpperCase()}.`]);
}

const verify = (serviceUrl: string, id: string, tenant = t) =>
  h.request('POST', `${serviceUrl}/custom-domains/${id}/verify`, { token: tenant.token });

async function domainState(serviceUrl: string, id: string, tenant = t): Promise<string> {
  const res = await h.request('GET', `${serviceUrl}/custom-domains`, { token: tenant.token });
  const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
  if (active?.id === id) return active.state;
  if (pending?.id === id) return pending.state;
  const row = await h.deps.store.db
    .selectFrom('custom_domains')
    .select('state')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.state;
}

const reaches = (serviceUrl: string, id: string, state: string) =>
  pollUntil(`domain ${id} to be ${state}`, async () =>
    (await domainState(serviceUrl, id)) === state ? true : undefined,
  );

describe('registration', () => {
  test('a new domain is unverified, lower-cased, with a verify_acm CNAME and a route_app_traffic CNAME to the ingress', async () => {
    const service = await newService();
    const domain = await addDomain(service, 'Shop.Example.COM');
    assert.equal(domain.state, 'unverified');
    assert.equal(domain.domain, 'shop.example.com');
    const [acm, route] = domain.dns_records;
    assert.equal(acm?.purpose, 'verify_acm');
    assert.equal(acm?.record_type, 'CNAME');
    assert.match(acm?.record_name ?? '', /^_[0-9a-f]{32}\.shop\.example\.com$/);
    assert.match(acm?.record_value ?? '', /^_[0-9a-f]{32}\.acm-validations\.berth\.test$/);
    assert.deepEqual(
      { ...route, created_at: undefined },
      {
        purpose: 'route_app_traffic',
        record_name: 'shop.example.com',
        record_type: 'CNAME',
        record_value: ingressHost,
        created_at: undefined,
      },
    );
    const listed = await h.request('GET', `${service}/custom-domains`, { token: t.token });
    assert.deepEqual(
      listed.body.data.custom_domain.pending_domain.dns_records,
      domain.dns_records,
      'records are stable across reads',
    );
    assert.equal(listed.body.data.custom_domain.is_active, false);
    assert.equal(listed.body.data.custom_domain.is_pending, true);
    assert.equal(listed.body.data.custom_domain.active_domain, null);
  });

  test('on GCP the traffic record is an A record to the ingress address', async () => {
    const gcp = await h.tenant({ cloud: 'gcp' });
    const service = await newService(gcp);
    const domain = await addDomain(service, 'gcp.example.org', gcp);
    const route = domain.dns_records.find((r) => r.purpose === 'route_app_traffic');
    assert.equal(route?.record_type, 'A');
    assert.match(route?.record_value ?? '', /^\d+\.\d+\.\d+\.\d+$/);
  });

  test('invalid domains are 422 with the field domain', async () => {
    const service = await newService();
    const cases: [string, unknown][] = [
      ['one label', 'localhost'],
      ['a label over 63 characters', `${'a'.repeat(64)}.example.com`],
      ['a leading hyphen', '-shop.example.com'],
      ['a trailing hyphen', 'shop-.example.com'],
      ['an IP address', '192.0.2.10'],
      ['an IPv6 address', '2001:db8::1'],
      ['a wildcard', '*.example.com'],
      ['over 253 characters', `${Array.from({ length: 5 }, () => 'a'.repeat(60)).join('.')}.com`],
      ['empty', ''],
      ['blank', '   '],
      ['a number', 42],
      ['null', null],
      ['an underscore', 'my_shop.example.com'],
      ['a space', 'my shop.example.com'],
    ];
    for (const [what, domain] of cases) {
      const res = await h.request('POST', `${service}/custom-domains`, { token: t.token, body: { domain } });
      assert.equal(res.status, 422, `${what}: ${res.raw}`);
      assert.equal(res.body.error_code, 'validation', what);
      assert.equal(res.body.errors[0].field, 'domain', what);
    }
    const missing = await h.request('POST', `${service}/custom-domains`, { token: t.token, body: {} });
    assert.equal(missing.status, 422);
    assert.equal(missing.body.errors[0].field, 'domain');
  });

  test('only web services can have one: a worker, a job, a cron or an internal service is 422 on domain', async () => {
    const { port: _port, ...noPort } = VALID_SERVICE.docker;
    for (const [type, kind, extra] of [
      ['worker', 'a worker', {}],
      ['job', 'a job', {}],
      ['cron', 'a cron', { cron_schedule: '*/5 * * * *' }],
      ['internal', 'an internal', { port: 8080 }],
    ] as const) {
      const service = await newService(t, { ...noPort, type, ...extra });
      const res = await h.request('POST', `${service}/custom-domains`, {
        token: t.token,
        body: { domain: `${type}.example.com` },
      });
      assert.equal(res.status, 422, `${type}: ${res.raw}`);
      assert.deepEqual(res.body.errors, [
        { field: 'domain', error: `domain can only be added to web services, and this is ${kind} service` },
      ]);
    }
    const web = await newService();
    const ok = await h.request('POST', `${web}/custom-domains`, {
      token: t.token,
      body: { domain: 'worker.example.com' },
    });
    assert.equal(ok.status, 200, 'a refused name was not taken');
  });

  test('a web service holding a domain cannot be PATCHed to a type no domain fits: 422 on type, nothing changed', async () => {
    const web = await newService();
    const patch = (body: object) => h.request('PATCH', web, { token: t.token, body });
    assert.equal((await patch({ type: 'worker' })).status, 200, 'without a domain the type may change');
    assert.equal((await patch({ type: 'web' })).status, 200);
    await addDomain(web, 'keeps-web.example.com');
    for (const type of ['worker', 'internal', 'job']) {
      const res = await patch({ type, port: type === 'internal' ? 8080 : undefined });
      assert.equal(res.status, 422, `${type}: ${res.raw}`);
      assert.deepEqual(res.body.errors, [
        {
          field: 'type',
          error: 'type must stay web while the service has the custom domain keeps-web.example.com',
        },
      ]);
    }
    const read = await h.request('GET', web, { token: t.token });
    assert.equal(read.body.data.service.type, 'web');
    assert.equal((await patch({ name: 'Still Web', type: 'web' })).status, 200, 'other changes still pass');
  });

  test('a type change racing a domain registration never leaves a worker holding a domain', async () => {
    for (let round = 0; round < 10; round++) {
      const web = await newService();
      const [patched, added] = await Promise.all([
        h.request('PATCH', web, { token: t.token, body: { type: 'worker' } }),
        h.request('POST', `${web}/custom-domains`, {
          token: t.token,
          body: { domain: `race-${round}.example.com` },
        }),
      ]);
      const read = await h.request('GET', web, { token: t.token });
      const pair = await h.request('GET', `${web}/custom-domains`, { token: t.token });
      const holds = pair.body.data.custom_domain.pending_domain !== null;
      assert.ok(!(read.body.data.service.type === 'worker' && holds), `round ${round}`);
      assert.equal(
        [patched.status, added.status].filter((s) => s === 200).length,
        1,
        `round ${round}: one wins`,
      );
    }
  });

  test('a domain any account holds is a 409; another account cannot see or verify it', async () => {
    const mine = await newService();
    const domain = await addDomain(mine, 'taken.example.com');
    const again = await h.request('POST', `${mine}/custom-domains`, {
      token: t.token,
      body: { domain: 'TAKEN.example.com' },
    });
    assert.equal(again.status, 409);
    const other = await h.tenant();
    const theirs = await newService(other);
    const res = await h.request('POST', `${theirs}/custom-domains`, {
      token: other.token,
      body: { domain: 'taken.example.com' },
    });
    assert.equal(res.status, 409);
    assert.equal(res.body.error_code, 'conflict');
    // With B's own service in the path, A's domain id is not found.
    const probe = await verify(theirs, domain.id, other);
    assert.equal(probe.status, 404);
    assert.deepEqual(probe.body, {
      error_code: 'notfound',
      message: 'Custom domain not found',
      errors: null,
    });
    // With A's path, B's token finds nothing either.
    const cross = await verify(mine, domain.id, other);
    assert.equal(cross.status, 404);
  });

  test('the plan needs custom domains (403); a service being deleted refuses (403)', async () => {
    const starter = await h.tenant({ plan: 'starter' });
    const service = await newService(starter);
    const res = await h.request('POST', `${service}/custom-domains`, {
      token: starter.token,
      body: { domain: 'x.example.com' },
    });
    assert.equal(res.status, 403);
    assert.equal(res.body.error_code, 'forbidden');

    const doomed = await newService();
    assert.equal((await h.request('DELETE', doomed, { token: t.token })).status, 202);
    const refused = await h.request('POST', `${doomed}/custom-domains`, {
      token: t.token,
      body: { domain: 'late.example.com' },
    });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.message, 'Service is being deleted');
  });
});

describe('verification and cut-over', () => {
  test('no records: 422 DOMAIN_VERIFICATION_FAILED naming both records', async () => {
    const service = await newService();
    const domain = await addDomain(service, 'empty.example.com');
    const res = await verify(service, domain.id);
    assert.equal(res.status, 422);
    assert.equal(res.body.error_code, 'DOMAIN_VERIFICATION_FAILED');
    assert.deepEqual(
      res.body.errors.map((e: { field: string }) => e.field),
      domain.dns_records.map((r) => r.record_name),
    );
    assert.ok(res.body.errors.every((e: { error: string }) => /found no record/.test(e.error)));
    assert.equal(await domainState(service, domain.id), 'unverified');
  });

  test('one record wrong: 422 naming only that one, with what was found', async () => {
    const service = await newService();
    const domain = await addDomain(service, 'half.example.com');
    const [acm, route] = domain.dns_records as [Record, Record];
    publish([acm]);
    dns.set(route.record_name, 'CNAME', ['somewhere-else.example.net']);
    const res = await verify(service, domain.id);
    assert.equal(res.status, 422);
    assert.deepEqual(res.body.errors, [
      {
        field: route.record_name,
        error: `expected CNAME ${route.record_name} -> ${route.record_value}; found somewhere-else.example.net`,
      },
    ]);
  });

  test('both right: verified, then deployed; the service origin follows; a second domain replaces the first', async () => {
    const service = await newService();
    const first = await addDomain(service, 'www.first.example');
    publish(first.dns_records);
    const verified = await verify(service, first.id);
    assert.equal(verified.status, 200, verified.raw);
    assert.ok(
      ['verified', 'deploy_queued', 'deploying', 'deployed'].includes(verified.body.data.custom_domain.state),
    );
    await reaches(service, first.id, 'deployed');

    const served = (await h.request('GET', service, { token: t.token })).body.data.service;
    assert.equal(served.origin, 'https://www.first.example');
    assert.equal(served.custom_domain_id, first.id);
    assert.deepEqual(served.custom_domain, {
      id: first.id,
      domain: 'www.first.example',
      origin: 'https://www.first.example',
      state: 'deployed',
    });
    const pair = (await h.request('GET', `${service}/custom-domains`, { token: t.token })).body.data
      .custom_domain;
    assert.equal(pair.is_active, true);
    assert.equal(pair.active_domain.id, first.id);
    assert.equal(pair.pending_domain, null);

    const again = await verify(service, first.id);
    assert.equal(again.status, 200, 'verifying a serving domain again is harmless');
    assert.equal(again.body.data.custom_domain.state, 'deployed');

    const second = await addDomain(service, 'www.second.example');
    const pending = (await h.request('GET', `${service}/custom-domains`, { token: t.token })).body.data
      .custom_domain;
    assert.equal(pending.active_domain.id, first.id);
    assert.equal(pending.pending_domain.id, second.id);
    publish(second.dns_records);
    assert.equal((await verify(service, second.id)).status, 200);
    await reaches(service, second.id, 'deployed');
    await reaches(service, first.id, 'deleted');

    const switched = (await h.request('GET', service, { token: t.token })).body.data.service;
    assert.equal(switched.origin, 'https://www.second.example');
    assert.equal(switched.custom_domain_id, second.id);
    const listed = await h.request('GET', `/v1/environments/${t.envId}/services`, { token: t.token });
    const inList = listed.body.data.services.find(
      (s: { custom_domain_id: string }) => s.custom_domain_id === second.id,
    );
    assert.equal(inList.origin, 'https://www.second.example');

    const retired = await verify(service, first.id);
    assert.equal(retired.status, 409, 'a retired domain cannot be verified again');
    // A retired name is free to register again.
    const reused = await h.request('POST', `${service}/custom-domains`, {
      token: t.token,
      body: { domain: 'www.first.example' },
    });
    assert.equal(reused.status, 200);

    const audit = (await h.request('GET', '/v1/audit-logs?limit=100', { token: t.token })).body.data
      .audit_logs;
    const actions = audit
      .filter((e: { resource_id: string }) => [first.id, second.id].includes(e.resource_id))
      .map((e: { action: string }) => e.action);
    assert.deepEqual(actions.sort(), [
      'custom_domain.create',
      'custom_domain.create',
      'custom_domain.verify',
      'custom_domain.verify',
    ]);
  });
});

describe('certificates (the sim)', () => {
  let receiver: Server;
  let receiverUrl: string;
  const received: string[] = [];
  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  });
  after(() => new Promise((resolve) => receiver.close(resolve)));

  test('a verified domain reports a certificate as a CA issues one: pending, then issued with its dates; each step an event', async () => {
    const hook = await h.request('POST', '/v1/webhooks', {
      token: t.token,
      body: {
        url: receiverUrl,
        event_types: ['certificate.issued', 'certificate.renewed', 'certificate.failed'],
      },
    });
    assert.equal(hook.status, 200, hook.raw);
    const service = await newService();
    const domain = await addDomain(service, 'www.certified.example');
    assert.equal((domain as { certificate?: unknown }).certificate, null, 'none before verification');
    publish(domain.dns_records);
    const verified = await verify(service, domain.id);
    assert.equal(verified.status, 200, verified.raw);
    assert.equal(verified.body.data.custom_domain.certificate.status, 'pending');
    assert.equal(verified.body.data.custom_domain.certificate.not_after, null);
    const certificate = await pollUntil('the certificate to be issued', async () => {
      const res = await h.request('GET', `${service}/custom-domains`, { token: t.token });
      const { active_domain: active, pending_domain: pending } = res.body.data.custom_domain;
      const c = (active ?? pending)?.certificate;
      return c?.status === 'issued' ? c : undefined;
    });
    assert.equal(certificate.issuer, 'CN=Berth Simulated CA, O=Berth');
    assert.equal(certificate.last_error, null);
    const notBefore = Date.parse(certificate.not_before);
    const notAfter = Date.parse(certificate.not_after);
    const lifetime = notAfter - notBefore;
    assert.equal(lifetime, 90 * 86_400_000, "Let's Encrypt's 90 days");
    const renewAfter = Date.parse(certificate.renew_after);
    assert.ok(renewAfter <= notBefore + (lifetime * 2) / 3 && renewAfter >= notBefore + (lifetime * 19) / 30);

    // Its renewal time passed: the renewal scan queues it once, and a new certificate replaces it.
    await h.deps.store.db
      .updateTable('certificates')
      .set({ renew_after: new Date(Date.now() - 1000) })
      .where('custom_domain_id', '=', domain.id)
      .execute();
    assert.equal(await queueDueCertificates(h.deps.store.db), 1);
    assert.equal(
      await queueDueCertificates(h.deps.store.db),
      0,
      'a certificate with a job is not queued again',
    );
    const renewed = await pollUntil('the certificate to be renewed', async () => {
      const row = await findCertificate(h.deps.store.db, domain.id);
      return row?.status === 'issued' && (row.not_before?.getTime() ?? 0) > notBefore ? row : undefined;
    });
    assert.ok((renewed.renew_after?.getTime() ?? 0) > Date.now(), 'the next renewal is in the future');

    // Issued, then renewed: on the events stream and to the webhook, the certificate as the read shows it.
    const events = await h.deps.store.db
      .selectFrom('events')
      .select(['type', 'data'])
      .where('account_id', '=', t.accountId)
      .where('type', 'like', 'certificate.%')
      .orderBy('seq')
      .execute();
    // Other tests' domains of the tenant have certificates too.
    const mine = (data: unknown) => (data as { custom_domain_id: string }).custom_domain_id === domain.id;
    assert.deepEqual(
      events.filter((e) => mine(e.data)).map((e) => e.type),
      ['certificate.issued', 'certificate.renewed'],
    );
    const delivered = await pollUntil('both deliveries', async () => {
      const bodies = received.map((body) => JSON.parse(body)).filter((e) => mine(e.data));
      return bodies.length >= 2 ? bodies : undefined;
    });
    assert.deepEqual(delivered.map((e) => e.type).sort(), ['certificate.issued', 'certificate.renewed']);
    const renewal = delivered.find((e) => e.type === 'certificate.renewed');
    assert.deepEqual(renewal.data, {
      custom_domain_id: domain.id,
      service_id: service.split('/').at(-1),
      domain: 'www.certified.example',
      status: 'issued',
      issuer: 'CN=Berth Simulated CA, O=Berth',
      not_before: renewed.not_before?.toISOString(),
      not_after: renewed.not_after?.toISOString(),
      renew_after: renewed.renew_after?.toISOString(),
      last_error: null,
    });
  });
});

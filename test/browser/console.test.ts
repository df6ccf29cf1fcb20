import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type ConsoleSession, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { pollUntil } from '../helpers/poll.ts';

// The console as a person uses it: real `berth serve`, real headless Chromium, one flow from sign-in
// to sign-out. Each page is checked with axe-core and photographed at 1280 and 360 px.

let db: TestDatabase;
let dns: TestDnsServer;
let session: ConsoleSession;
let server: ConsoleSession['server'];
let context: BrowserContext;
let page: Page;
let token: string;
let envId: string;
let problems: string[];
let checkPage: ConsoleSession['checkPage'];

before(async () => {
  db = await createTestDatabase();
  dns = await startDnsServer();
  session = await startConsole({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    BERTH_DNS_SERVERS: dns.address,
  });
  ({ server, context, page, token, envId, problems, checkPage } = session);
});

after(async () => {
  await session?.close();
  await dns?.close();
  await db?.drop();
});

test('the console is served at / with a Content-Security-Policy', async () => {
  const response = await fetch(`${server.url}/`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /text\/html/);
  const csp = response.headers.get('content-security-policy') ?? '';
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /connect-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  // The first-start banner says where it is.
  assert.match(server.stdout(), new RegExp(`Console: ${server.url}/`));
});

test('sign in: a wrong token is refused in place, the right one is kept in the session only', async () => {
  await page.goto(`${server.url}/`);
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  await checkPage('sign-in');
  await page.getByLabel('API token').fill('00000000-0000-4000-8000-000000000000');
  await page.getByRole('button', { name: 'Sign in with the token' }).click();
  await page.getByText('This token was not accepted').waitFor();
  problems.length = 0; // the refused sign-in's 401 is the browser's console error, and expected
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in with the token' }).click();
  await page.getByRole('heading', { name: 'Environments' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.token')), token);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.deepEqual(await context.cookies(), []);
  await page.getByRole('cell', { name: 'default' }).waitFor();
  await checkPage('environments');
});

test('an environment: its live identity, state and (empty) services list', async () => {
  await page.getByRole('link', { name: 'default' }).click();
  await page.getByRole('heading', { name: 'Environment default' }).waitFor();
  await page.getByText('Ingress host').waitFor();
  await page.getByText('No service here yet').waitFor();
  assert.match(page.url(), new RegExp(`#/envs/${envId}$`));
  await checkPage('environment-empty');
});

test('create a service: fields follow source and type, and a field error is fixed in the form', async () => {
  await page.getByRole('link', { name: 'New service' }).click();
  await page.getByRole('heading', { name: 'New service' }).waitFor();
  // docker_image + web: the image and the port are asked for, and required.
  await page.getByLabel('Image (required)').waitFor();
  await page.getByLabel('Port (required)').waitFor();
  assert.equal(await page.getByLabel('Repository').count(), 0);
  // Another source and type bring their own fields.
  await page.getByLabel('Source (required)').selectOption('github');
  await page.getByLabel('Repository (required)').waitFor();
  await page.getByLabel('Branch (required)').waitFor();
  assert.equal(await page.getByLabel(/^Image/).count(), 0);
  await page.getByLabel('Type').selectOption('cron');
  await page.getByLabel('Cron schedule (required)').waitFor();
  assert.equal(await page.getByLabel(/^Port/).count(), 0);
  await page.getByLabel('Source (required)').selectOption('helm_chart');
  await page.getByLabel('Chart name (required)').waitFor();
  assert.equal(await page.getByLabel('Replicas (required)').count(), 0, 'a chart sizes itself');
  await page.getByLabel('Source (required)').selectOption('docker_image');
  await page.getByLabel('Type').selectOption('web');

  // A name the API refuses: its message appears next to the name.
  await page.getByLabel('Name (required)').fill('hello-web');
  await page.getByLabel('Image (required)').fill('acme/hello');
  await page.getByLabel('Port (required)').fill('8080');
  await page.getByLabel('Replicas (required)').fill('2');
  await page.getByLabel('CPU (min) (required)').fill('0.5');
  await page.getByLabel('Memory MB (min) (required)').fill('256');
  await page.getByRole('button', { name: 'Create service' }).click();
  await page.locator('#create-name-error').getByText('name may contain only letters and spaces').waitFor();
  assert.equal(await page.getByLabel('Name (required)').getAttribute('aria-invalid'), 'true');
  problems.length = 0; // the 422 is the browser's console error, and expected
  await checkPage('create-service');

  await page.getByLabel('Name (required)').fill('hello web');
  await page.getByRole('button', { name: 'Create service' }).click();
  await page.getByRole('heading', { name: 'hello web' }).waitFor();
});

test('the services list shows the service with its state, run status and ready replicas', async () => {
  await page.getByRole('link', { name: '← Environment' }).click();
  const row = page.getByRole('row', { name: /hello web/ });
  await row.waitFor();
  await row.getByText('of 2').waitFor();
  await checkPage('environment');
  await row.getByRole('link', { name: 'hello web' }).click();
  await page.getByRole('heading', { name: 'hello web' }).waitFor();
});

test('deploy with a target and a note, and follow the deployment live to success', async () => {
  await page.getByText('Not deployed yet').waitFor();
  await page.getByLabel('Image tag').fill('v2');
  await page.getByLabel('Note').fill('first deploy');
  await page.getByRole('button', { name: 'Deploy', exact: true }).click();
  await page.getByRole('heading', { name: 'Deployment' }).waitFor();
  await page.locator('.badge', { hasText: 'success' }).waitFor({ timeout: 60_000 });
  await page.getByText('end of the deployment').waitFor({ timeout: 60_000 });
  await page.getByRole('log').getByText('outcome').first().waitFor();
  await page.getByText('first deploy', { exact: true }).waitFor();
  await checkPage('deployment');

  await page.getByRole('link', { name: '← hello web' }).click();
  const row = page.getByRole('row', { name: /first deploy/ });
  await row.getByText('success').waitFor();
  await row.getByText('v2').waitFor();
});

test('settings: a PATCH the API refuses shows its error next to the field; a good one saves', async () => {
  // The service page lists its alerts (none have tripped here).
  await page.getByRole('heading', { name: 'Alerts' }).waitFor();
  await page.getByText('No alerts: none of its rules has tripped.').waitFor();
  await page.getByLabel('Port (required)').last().fill('70000');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.locator('#settings-port-error').waitFor();
  problems.length = 0; // the expected 422
  await checkPage('service');
  await page.locator('#settings-port').fill('8081');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.getByText('Settings saved.').waitFor();
  await pollUntil('the port saved', async () =>
    (await serviceNamed('hello web')).port === 8081 ? true : undefined,
  );
});

test('secrets: a full replace with a diff; a sensitive value is never shown again', async () => {
  await page.getByRole('link', { name: 'Secrets' }).click();
  await page.getByRole('heading', { name: 'Secrets of hello web' }).waitFor();
  await page.getByText('No secrets yet').waitFor();
  await page.getByRole('button', { name: 'Add a secret' }).click();
  await page.getByLabel('Key 1').fill('LOG_LEVEL');
  await page.getByLabel('Value of LOG_LEVEL').fill('debug');
  await page.getByRole('button', { name: 'Add a secret' }).click();
  await page.getByLabel('Key 2').fill('API_KEY');
  await page.getByLabel('Value of API_KEY').fill('s3cret-value');
  await page.getByRole('checkbox').nth(1).check();
  assert.equal(await page.getByLabel('Value of API_KEY').getAttribute('type'), 'password');
  await page.getByRole('button', { name: 'Review changes' }).click();
  await page.locator('.diff .added', { hasText: 'LOG_LEVEL' }).waitFor();
  await page.locator('.diff .added', { hasText: 'API_KEY' }).waitFor();
  await page.getByRole('button', { name: 'Save 2 changes' }).click();
  await page.getByText('Secrets saved.').waitFor();
  await page.getByText('set (hidden); type to replace').waitFor();
  assert.equal(await page.getByLabel('Value of API_KEY').inputValue(), '');
  assert.equal(await page.getByLabel('Value of LOG_LEVEL').inputValue(), 'debug');
  assert.doesNotMatch(await page.content(), /s3cret-value/);

  // Change one, remove the other: the diff says so, and the sensitive value is not needed to keep it.
  await page.getByLabel('Value of LOG_LEVEL').fill('info');
  await page.getByRole('button', { name: 'Review changes' }).click();
  await page.locator('.diff .changed', { hasText: 'LOG_LEVEL' }).waitFor();
  assert.equal(
    await page.locator('.diff li').count(),
    1,
    'a sensitive value left empty is kept, not changed',
  );
  await checkPage('secrets');
  await page.getByRole('button', { name: 'Save 1 change' }).click();
  await page.getByText('Secrets saved.').waitFor();
  const service = await serviceNamed('hello web');
  const stored = unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path: { envId, serviceId: service.id } },
    }),
  );
  assert.deepEqual(
    stored.secrets.map((s) => [s.key, s.value, s.is_sensitive]),
    [
      ['API_KEY', undefined, true],
      ['LOG_LEVEL', 'info', false],
    ],
  );
  await page.getByRole('link', { name: '← hello web' }).click();
  await page.getByRole('heading', { name: 'hello web' }).waitFor();
});

test('custom domains: add one, see its DNS records, and the verification errors per record', async () => {
  await page.getByRole('link', { name: 'Custom domains' }).click();
  await page.getByText('No custom domain yet').waitFor();
  await page.getByLabel('Add a domain').fill('app.example.com');
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page.getByRole('heading', { name: /Pending: app\.example\.com/ }).waitFor();
  const records = page.locator('.record');
  await pollUntil('two DNS records', async () => ((await records.count()) === 2 ? true : undefined));
  await page
    .getByRole('button', { name: /Copy .* record value/ })
    .first()
    .waitFor();
  await page.getByRole('button', { name: 'Verify', exact: true }).click();
  await page.getByText('Not verified yet').waitFor();
  await page.locator('.record.failing').first().waitFor();
  problems.length = 0; // the expected 422
  await checkPage('domains');

  // With the records in place, it verifies.
  const service = await serviceNamed('hello web');
  const domains = unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}/custom-domains', {
      params: { path: { envId, serviceId: service.id } },
    }),
  );
  for (const r of domains.custom_domain.pending_domain?.dns_records ?? []) {
    dns.set(r.record_name, r.record_type as 'A' | 'CNAME', [r.record_value]);
  }
  await page.getByRole('button', { name: 'Verify', exact: true }).click();
  await page
    .getByRole('heading', { name: /app\.example\.com/ })
    .locator('.badge')
    .filter({ hasNotText: 'unverified' })
    .waitFor();

  // The sim's CA issues the certificate a moment after verification; the page shows it once read again.
  const certificate = page.getByRole('heading', { name: /HTTPS certificate/ });
  await pollUntil(
    'the certificate to show as issued',
    async () => {
      await page.reload();
      await certificate.first().waitFor();
      return (await certificate.first().locator('.badge').textContent()) === 'issued' ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
  await page.getByText('CN=Berth Simulated CA, O=Berth').waitFor();
  await page.getByText('Served over HTTPS; plain HTTP redirects there.').waitFor();
  assert.equal(await page.getByText('Last error').count(), 0, 'no error shown for an issued certificate');
  await checkPage('domains-certificate');
});

test('the audit log lists the actions, newest first', async () => {
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.getByRole('heading', { name: 'Audit log' }).waitFor();
  // The heading comes first, the rows when the page's read answers.
  await page.getByRole('cell', { name: 'custom_domain.create' }).waitFor();
  const actions = await page.locator('tbody tr td:nth-child(3)').allInnerTexts();
  for (const action of [
    'service.create',
    'deployment.create',
    'service.update',
    'service.secrets.replace',
    'custom_domain.create',
  ]) {
    assert.ok(actions.includes(action), `${action} in ${actions.join(', ')}`);
  }
  assert.equal(actions.at(-1), 'service.create', 'the oldest action is last');
  await checkPage('audit-log');
});

test('environment secrets open from the environment, empty with a hint', async () => {
  await page.getByRole('link', { name: 'Environments' }).click();
  await page.getByRole('link', { name: 'default' }).click();
  await page.getByRole('link', { name: 'Environment secrets' }).click();
  await page.getByRole('heading', { name: 'Environment secrets' }).waitFor();
  await page.getByText('No secrets yet').waitFor();
  await checkPage('environment-secrets');
});

test('dependencies: each one as made, a database with its backups, one taken and restored from the page (in place after confirming, and into a copy)', async () => {
  const { service } = unwrap(
    await client().POST('/v1/environments/{envId}/services', {
      params: { path: { envId } },
      body: {
        name: 'stores web',
        source: 'docker_image',
        type: 'web',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
        docker_image: 'acme/stores',
        ops_json: JSON.stringify({
          dependencies: {
            rds: { instances: [{ id: 'main-db', exports: { DB: '$endpoint' } }] },
            s3: { buckets: [{ id: 'files', exports: { BUCKET: '$name' } }] },
          },
        }),
      },
    }),
  );
  const path = { envId, serviceId: service.id };
  const deploy = unwrap(
    await client().POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
      params: { path },
      body: {},
    }),
  );
  assert.ok('deployment_id' in deploy);
  const deploymentId = deploy.deployment_id;
  await pollUntil('the deployment to succeed', async () => {
    const { deployment } = unwrap(
      await client().GET('/v1/deployments/{deploymentId}', {
        params: { path: { deploymentId } },
      }),
    );
    return deployment.state === 'success' ? true : undefined;
  });
  // The log's longest step keeps a space before its line.
  await page.goto(`${server.url}/#/deployments/${deploymentId}`);
  await page.getByText('end of the deployment').waitFor();
  assert.match(
    (await page.getByRole('log').textContent()) ?? '',
    /dependencies +Making rds instances main-db/,
  );
  await page.goto(`${server.url}/#/envs/${envId}/services/${service.id}`);
  await page.getByRole('link', { name: 'Dependencies' }).click();
  await page.getByRole('heading', { name: /rds instances main-db/ }).waitFor();
  await page.getByRole('heading', { name: /s3 buckets files/ }).waitFor();
  await page.getByText('No backups yet.').waitFor();
  assert.equal(await page.getByRole('button', { name: /Back up files now/ }).count(), 0, 'buckets have none');
  await page.getByRole('button', { name: 'Back up main-db now' }).click();
  const table = page.getByRole('region', { name: 'Backups of main-db, newest first' });
  await table.getByRole('cell', { name: 'manual' }).waitFor();
  await table.getByText('completed').waitFor();
  await checkPage('dependencies');

  // Restore into the dependency: a question first; the service runs, so the API wants it stopped, and
  // the page asks again, naming it, before it sends force.
  await table.getByRole('button', { name: 'Restore', exact: true }).click();
  const question = page.getByRole('region', { name: /^Restore main-db from the backup taken/ });
  await question.getByText("Its data is replaced with the backup's").waitFor();
  await question.getByRole('button', { name: 'Restore main-db' }).click();
  await question.getByText('main-db is in use by stores web: restoring stops stores web').waitFor();
  problems.length = 0; // the API's 409 (in use) is the browser's console error, and expected
  assert.equal(
    await page.evaluate('document.activeElement?.textContent'),
    await question.getByRole('heading').textContent(),
    'focus is on the question',
  );
  await checkPage('dependency-restore-confirm');
  await question.getByRole('button', { name: 'Stop stores web and restore' }).click();
  await question.waitFor({ state: 'detached' });
  const restoreCell = table.getByRole('cell', { name: /into the dependency/ });
  await restoreCell.getByText('was stopped meanwhile').waitFor({ timeout: 30_000 });
  const backupsPath = { ...path, dependencyId: 'main-db' };
  const listed = async () =>
    unwrap(
      await client().GET(
        '/v1/environments/{envId}/services/{serviceId}/dependencies/{dependencyId}/backups',
        {
          params: { path: backupsPath },
        },
      ),
    ).backups;
  const [restored] = await listed();
  assert.equal(restored?.restore?.state, 'completed');
  assert.equal(restored?.restore?.into, 'same');
  assert.deepEqual(restored?.restore?.stopped_services, [service.id]);

  // Into a copy: nothing to confirm (nothing running is touched); the copy's address is shown.
  await table.getByRole('button', { name: 'Restore into a copy' }).click();
  const copyCell = table.getByRole('cell', { name: /into a copy/ });
  await copyCell.getByText('completed').waitFor({ timeout: 30_000 });
  const [copied] = await listed();
  assert.equal(copied?.restore?.into, 'new');
  assert.deepEqual(copied?.restore?.stopped_services, []);
  await copyCell.getByText(copied?.restore?.attributes.endpoint ?? 'no endpoint').waitFor();
  await checkPage('dependency-restored');
});

test('a failed database offers no backup, and says it can be backed up once it is available', async () => {
  const service = await serviceNamed('stores web');
  // The sim makes no failed database on request: the API's answer is read as it is, with main-db failed.
  const url = `${server.url}/v1/environments/${envId}/services/${service.id}/dependencies`;
  await page.route(url, async (route) => {
    const response = await route.fetch();
    const body = await response.json();
    for (const d of body.data.dependencies) {
      if (d.id === 'main-db') Object.assign(d, { state: 'failed', error: 'the instance did not start' });
    }
    await route.fulfill({ response, json: body });
  });
  try {
    await page.goto(`${server.url}/#/envs/${envId}/services/${service.id}/dependencies`);
    // The page may be open already (the last test ends there): read it again, through the route.
    await page.reload();
    await page.getByText('the instance did not start').waitFor();
    const backUp = page.getByRole('button', { name: 'Back up main-db now' });
    await backUp.waitFor();
    assert.equal(await backUp.isDisabled(), true);
    assert.equal(
      await backUp.getAttribute('aria-describedby').then((id) => page.locator(`#${id}`).textContent()),
      'main-db failed: it can be backed up once it is available.',
    );
    await checkPage('dependency-failed');
  } finally {
    await page.unroute(url);
  }
});

test('sign out forgets the token; the console asks to sign in again', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.token')), null);
  await page.goto(`${server.url}/#/audit`);
  await page.getByRole('heading', { name: 'Sign in to Berth' }).waitFor();
  assert.deepEqual(problems, []);
});

/** The API as it is, read with the typed client: what the console showed must be what is stored. */
function client() {
  return createClient({ baseUrl: server.url, token });
}

async function serviceNamed(name: string) {
  const { services } = unwrap(
    await client().GET('/v1/environments/{envId}/services', { params: { path: { envId } } }),
  );
  const service = services.find((s) => s.name === name);
  assert.ok(service, name);
  return service;
}

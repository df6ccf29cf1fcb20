import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type ConsoleSession, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';

// What a new user tripped over in the console (issue 25, item 15): words, names, the state of a
// service whose last deploy failed, narrow screens, a conflict, and how many requests a list costs.

let db: TestDatabase;
let c: ConsoleSession;
let page: Page;
let serviceId: string;
let secondId: string;

// Each test stands on its own (signed in, the services made and deployed here), so each fails for its
// own reason.
before(async () => {
  db = await createTestDatabase();
  c = await startConsole({ BERTH_DATA_DIR: db.dataDir, BERTH_DATABASE_URL: db.databaseUrl ?? '' });
  page = c.page;
  serviceId = await createService('hello web');
  secondId = await createService('second web');
  // hello web: v1 serves 2 of 2 replicas, then a deploy of fail-v2 fails.
  assert.equal(await deployAndWait('v1'), 'success');
  assert.equal(await deployAndWait('fail-v2'), 'failed');
});

after(async () => {
  await c?.close();
  await db?.drop();
});

const client = () => createClient({ baseUrl: c.server.url, token: c.token });

/** This tab holds the token, as a sign-in leaves it. */
async function signedIn(): Promise<void> {
  if (!page.url().startsWith(c.server.url)) await page.goto(`${c.server.url}/`);
  await page.evaluate((token) => sessionStorage.setItem('berth.token', token), c.token);
}
const servicePath = () => ({ envId: c.envId, serviceId });

async function createService(name: string): Promise<string> {
  const { service } = unwrap(
    await client().POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name,
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 2,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
      },
    }),
  );
  return service.id;
}

async function deployAndWait(tag: string): Promise<string> {
  const accepted = unwrap(
    await client().POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
      params: { path: servicePath() },
      body: { docker_image_tag: tag },
    }),
  );
  const id = 'deployment_id' in accepted ? accepted.deployment_id : '';
  return pollUntil(`deployment of ${tag} to end`, async () => {
    const { deployment } = unwrap(
      await client().GET('/v1/deployments/{deploymentId}', { params: { path: { deploymentId: id } } }),
    );
    return deployment.state === 'success' || deployment.state === 'failed' ? deployment.state : undefined;
  });
}

/** The text the page shows, without the hidden parts (what a person reads). */
const shownText = async () => (await page.locator('main').textContent()) ?? '';

test('a wrong token on the first sign-in says it was not accepted and what to check', async () => {
  await page.goto(`${c.server.url}/`);
  await page.getByLabel('API token').fill('00000000-0000-4000-8000-000000000000');
  await page.getByRole('button', { name: 'Sign in with the token' }).click();
  const error = page.locator('#token-error');
  await error.getByText('This token was not accepted').waitFor();
  assert.match((await error.textContent()) ?? '', /berth admin tokens issue/);
  assert.doesNotMatch(await shownText(), /sign in again/i);
  c.problems.length = 0; // the refused sign-in's 401 is the browser's console error, and expected
  await c.checkPage('clarity-sign-in-refused');
});

test('field errors under a field name it by its label, not by the API field', async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/new`);
  await page.getByLabel('Name (required)').fill('labels');
  await page.getByLabel('Image (required)').fill('acme/hello');
  await page.getByLabel('Port (required)').fill('8080');
  await page.getByRole('button', { name: 'Create service' }).click();
  await page.locator('#create-replica_count-error').waitFor();
  assert.equal(
    await page.locator('#create-replica_count-error').textContent(),
    'Replicas is a required field',
  );
  assert.equal(
    await page.locator('#create-cpu_count_min-error').textContent(),
    'CPU (min) is a required field',
  );
  assert.doesNotMatch((await page.locator('form').textContent()) ?? '', /replica_count|cpu_count_min/);
  c.problems.length = 0; // the expected 422
  await c.checkPage('clarity-field-errors');
});

test('the services list is one request', async () => {
  await signedIn();
  const reads: string[] = [];
  const onRequest = (r: { url(): string }) => {
    const { pathname } = new URL(r.url());
    if (pathname.startsWith('/v1/')) reads.push(pathname);
  };
  page.on('request', onRequest);
  try {
    await page.goto(`${c.server.url}/#/envs/${c.envId}`);
    await page.getByRole('row', { name: /second web/ }).waitFor();
    await page.getByRole('row', { name: /hello web/ }).waitFor();
    await page.waitForLoadState('networkidle');
  } finally {
    page.off('request', onRequest);
  }
  assert.deepEqual(
    reads.filter((p) => p.includes('/services')),
    [`/v1/environments/${c.envId}/services`],
    'one read for the whole list',
  );
});

test('run status is said in words, on the list and on the service', async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}`);
  const row = page.getByRole('row', { name: /second web/ });
  await row.getByText('Not deployed').waitFor();
  await row.getByText('0 of 2').waitFor();
  await page
    .getByRole('row', { name: /hello web/ })
    .getByText('Running')
    .waitFor();
  assert.doesNotMatch(await shownText(), /not_deployed/);
  await row.getByRole('link', { name: 'second web' }).click();
  await page.getByRole('heading', { name: 'second web' }).waitFor();
  await page.locator('.facts').getByText('Not deployed').waitFor();
  assert.doesNotMatch(await shownText(), /not_deployed/);
});

test('the secrets, domains and deployment pages name their service', async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}/secrets`);
  await page.getByRole('heading', { name: 'Secrets of hello web' }).waitFor();
  await page.getByRole('link', { name: '← hello web' }).waitFor();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}/domains`);
  await page.getByRole('heading', { name: 'Custom domains of hello web' }).waitFor();
  await page.getByRole('link', { name: '← hello web' }).waitFor();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}`);
  await page
    .getByRole('link', { name: /Deployment of/ })
    .first()
    .click();
  await page.getByRole('heading', { name: 'Deployment of hello web' }).waitFor();
  await page.getByRole('link', { name: '← hello web' }).click();
  await page.getByRole('heading', { name: 'hello web' }).waitFor();
});

test('a failed deploy while the previous version serves says so, in amber, not red', async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}`);
  const state = page.locator('.facts dd').first();
  await state.getByText('the previous version still serves (2 of 2 ready)').waitFor();
  assert.equal(await state.locator('.badge.bad').count(), 0, 'not shown as an outage');
  await state.locator('.badge.busy', { hasText: 'last deploy failed' }).waitFor();
  await c.checkPage('clarity-deploy-failed-serving');

  await page.goto(`${c.server.url}/#/envs/${c.envId}`);
  const row = page.getByRole('row', { name: /hello web/ });
  await row.getByText('the previous version still serves').waitFor();
  assert.equal(await row.locator('.badge.bad').count(), 0);
  await c.checkPage('clarity-services-list');
});

test("another service's page shows that service's settings, not the last page's", async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}`);
  const name = page.locator('#settings-name');
  await name.fill('hello web edited');
  // Straight from one service to another (a link pasted, history): the same page with other props.
  await page.evaluate(`location.hash = '#/envs/${c.envId}/services/${secondId}'`);
  await page.getByRole('heading', { name: 'second web' }).waitFor();
  await page.getByText('Not deployed yet').waitFor();
  assert.equal(await name.inputValue(), 'second web');
  const patches: string[] = [];
  const onRequest = (r: { method(): string; postData(): string | null }) => {
    if (r.method() === 'PATCH') patches.push(r.postData() ?? '');
  };
  page.on('request', onRequest);
  try {
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved.').waitFor();
  } finally {
    page.off('request', onRequest);
  }
  assert.deepEqual(patches, [], 'nothing changed, nothing sent');
  const { service } = unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}', {
      params: { path: { envId: c.envId, serviceId: secondId } },
    }),
  );
  assert.equal(service.name, 'second web');
});

test('a viewer on a deployment sees why its log is not shown, at once, not a wait that never ends', async () => {
  const { token } = unwrap(await client().POST('/v1/tokens', { body: { name: 'a viewer', role: 'viewer' } }));
  const { deployments } = unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}/deployments', {
      params: { path: servicePath() },
    }),
  );
  const deploymentId = deployments[0]?.id ?? '';
  if (!page.url().startsWith(c.server.url)) await page.goto(`${c.server.url}/`);
  await page.evaluate((t) => sessionStorage.setItem('berth.token', t), token.token);
  const logReads: string[] = [];
  const onRequest = (r: { url(): string }) => {
    if (new URL(r.url()).pathname.endsWith('/logs')) logReads.push(r.url());
  };
  page.on('request', onRequest);
  try {
    await page.goto(`${c.server.url}/#/deployments/${deploymentId}`);
    await page.getByRole('heading', { name: 'Deployment of hello web' }).waitFor();
    await page.getByRole('alert').getByText('Not allowed: This call needs the developer role').waitFor();
    await page.waitForTimeout(1500);
  } finally {
    page.off('request', onRequest);
  }
  assert.doesNotMatch(await shownText(), /Waiting for the first line/);
  assert.equal(await page.getByRole('log').count(), 0, 'the reason, not an empty log box');
  assert.equal(logReads.length, 1, 'a refusal is not asked again');
  c.problems.length = 0; // the expected 403
  await page.evaluate((t) => sessionStorage.setItem('berth.token', t), c.token);
});

test('a viewer on the secrets page is told values are not shown to the role, not shown an empty value', async () => {
  const path = { envId: c.envId, serviceId: secondId };
  unwrap(
    await client().PUT('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path },
      body: { secrets: [{ key: 'LOG_LEVEL', value: 'debug' }] },
    }),
  );
  const { token } = unwrap(await client().POST('/v1/tokens', { body: { name: 'a reader', role: 'viewer' } }));
  if (!page.url().startsWith(c.server.url)) await page.goto(`${c.server.url}/`);
  await page.evaluate((t) => sessionStorage.setItem('berth.token', t), token.token);
  try {
    await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${secondId}/secrets`);
    const value = page.getByLabel('Value of LOG_LEVEL');
    await value.waitFor();
    await page.getByText('not shown: your role reads keys, not values').waitFor();
    assert.equal(await value.getAttribute('placeholder'), '•••••• set');
    await c.checkPage('clarity-secrets-viewer');
  } finally {
    await page.evaluate((t) => sessionStorage.setItem('berth.token', t), c.token);
  }
});

test('a viewer on the people page is told members and invitations need the admin role, and shown no invite form', async () => {
  const { token } = unwrap(await client().POST('/v1/tokens', { body: { name: 'a looker', role: 'viewer' } }));
  if (!page.url().startsWith(c.server.url)) await page.goto(`${c.server.url}/`);
  await page.evaluate((t) => sessionStorage.setItem('berth.token', t), token.token);
  try {
    await page.goto(`${c.server.url}/#/people`);
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    await page
      .getByRole('status')
      .getByText('Your role (viewer) cannot see the members or invite anyone: it needs the admin role.')
      .waitFor();
    assert.equal(await page.getByRole('button', { name: 'Try again' }).count(), 0, 'a refusal lasts');
    // A form the API would refuse is not offered.
    assert.equal(await page.getByRole('heading', { name: 'Invite someone' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Invite' }).count(), 0);
    assert.equal(await page.getByLabel('Email').count(), 0);
    c.problems.length = 0; // the expected 403s
    await c.checkPage('clarity-people-viewer');
  } finally {
    await page.evaluate((t) => sessionStorage.setItem('berth.token', t), c.token);
  }
});

/**
 * Every cell of the table inside the 360 px viewport, the table not scrolling sideways, and each value
 * shown after its column's name (the cell's ::before, from data-label).
 */
async function assertReadableAt360(table: string): Promise<void> {
  const layout = await page.locator(table).evaluate((t) => {
    const view = t.ownerDocument.defaultView;
    if (!view) throw new Error('the table is in no window');
    const wrap = t.closest('.table-wrap');
    if (!wrap) throw new Error('the table is not in a .table-wrap');
    const cells = [...t.querySelectorAll('tbody td')].map((td) => {
      const box = td.getBoundingClientRect();
      const before = view.getComputedStyle(td, '::before');
      return {
        left: box.left,
        right: box.right,
        label: td.getAttribute('data-label'),
        labelShown: before.content !== 'none' && before.display !== 'none',
      };
    });
    return { scrolls: wrap.scrollWidth > wrap.clientWidth, cells, width: view.innerWidth };
  });
  assert.equal(layout.width, 360);
  assert.equal(layout.scrolls, false, `${table} scrolls sideways`);
  assert.ok(layout.cells.length > 0);
  for (const cell of layout.cells) {
    assert.ok(cell.left >= 0 && cell.right <= 360, `${cell.label} at ${cell.left}..${cell.right}`);
    assert.ok(cell.label && cell.labelShown, `${cell.label}: its column's name is shown`);
  }
}

test('at 360 px the services and deployments tables show every column', async () => {
  await signedIn();
  await page.setViewportSize({ width: 360, height: 800 });
  try {
    await page.goto(`${c.server.url}/#/envs/${c.envId}`);
    await page.getByRole('row', { name: /second web/ }).waitFor();
    await assertReadableAt360('table:has(caption:text("Services of this environment"))');
    await page.getByRole('link', { name: 'hello web' }).click();
    // Within the deployments: the deploy_failed alert's row names fail-v2 too.
    await page
      .locator('table:has(caption:text("Deployments, newest first"))')
      .getByRole('row', { name: /fail-v2/ })
      .waitFor();
    await assertReadableAt360('table:has(caption:text("Deployments, newest first"))');
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  await c.checkPage('clarity-service-tables');
});

test('a secrets conflict offers to reload them, and reloading shows what is stored', async () => {
  await signedIn();
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}/secrets`);
  await page.getByText('No secrets yet').waitFor();
  // Someone else writes meanwhile.
  unwrap(
    await client().PUT('/v1/environments/{envId}/services/{serviceId}/secrets', {
      params: { path: servicePath() },
      body: { secrets: [{ key: 'FROM_ELSEWHERE', value: 'theirs', is_sensitive: false }] },
    }),
  );
  await page.getByRole('button', { name: 'Add a secret' }).click();
  await page.getByLabel('Key 1').fill('MINE');
  await page.getByLabel('Value of MINE').fill('mine');
  await page.getByRole('button', { name: 'Review changes' }).click();
  await page.getByRole('button', { name: 'Save 1 change' }).click();
  await page.getByText('Someone changed these secrets').waitFor();
  c.problems.length = 0; // the expected 412
  await c.checkPage('clarity-secrets-conflict');
  await page.getByRole('button', { name: 'Reload the secrets' }).click();
  await pollUntil('the stored secret in the editor', async () =>
    (await page.getByLabel('Value of FROM_ELSEWHERE').count()) === 1 ? true : undefined,
  );
  assert.equal(await page.getByLabel('Value of FROM_ELSEWHERE').inputValue(), 'theirs');
  assert.equal(await page.getByText('Someone changed these secrets').count(), 0);
  assert.equal(await page.getByLabel('Key 2').count(), 0, 'the edits were dropped');
  assert.deepEqual(c.problems, []);
});

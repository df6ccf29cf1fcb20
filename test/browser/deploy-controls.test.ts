import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createClient, unwrap } from '../../src/client/index.ts';
import { type ConsoleSession, signInWithToken, startConsole } from '../helpers/browser.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pollUntil } from '../helpers/poll.ts';

// Restart, roll back and cancel from the console, each asked first: what someone paged reaches for.
// Simulated steps of 2.5 s keep a deployment on its way long enough to cancel it, even on a loaded machine.

let db: TestDatabase;
let c: ConsoleSession;
let page: Page;
let serviceId: string;

before(async () => {
  db = await createTestDatabase();
  c = await startConsole({
    BERTH_DATA_DIR: db.dataDir,
    BERTH_DATABASE_URL: db.databaseUrl ?? '',
    BERTH_SIM_STEP_MS: '2500',
  });
  page = c.page;
  const { service } = unwrap(
    await client().POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name: 'paged web',
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
      },
    }),
  );
  serviceId = service.id;
  await signInWithToken(c);
});

after(async () => {
  await c?.close();
  await db?.drop();
});

const client = () => createClient({ baseUrl: c.server.url, token: c.token });

async function deploy(tag: string): Promise<string> {
  const accepted = unwrap(
    await client().POST('/v1/environments/{envId}/services/{serviceId}/deploy', {
      params: { path: { envId: c.envId, serviceId } },
      body: { docker_image_tag: tag },
    }),
  );
  return 'deployment_id' in accepted ? accepted.deployment_id : '';
}

async function deployment(id: string) {
  return unwrap(
    await client().GET('/v1/deployments/{deploymentId}', { params: { path: { deploymentId: id } } }),
  ).deployment;
}

async function ended(id: string) {
  return pollUntil(`deployment ${id} to end`, async () => {
    const d = await deployment(id);
    return d.state === 'success' || d.state === 'failed' ? d : undefined;
  });
}

/** The deployment the page moved to, once it shows. */
async function followedDeployment(): Promise<string> {
  await page.waitForURL(/#\/deployments\/[0-9a-f-]{36}$/);
  return page.url().split('/').pop() ?? '';
}

test('roll back asks first, names what it brings back, and opens the new deployment: the version before runs again', async () => {
  await ended(await deploy('v1'));
  await ended(await deploy('v2'));
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}`);
  await page.getByRole('button', { name: 'Roll back', exact: true }).click();
  const question = page.getByRole('region', { name: 'Roll paged web back?' });
  await question.getByText('runs again, with its target, ops.json and secrets as they were then').waitFor();
  await c.checkPage('roll-back-question');
  await question.getByRole('button', { name: 'Roll paged web back' }).click();
  const id = await followedDeployment();
  await page.getByRole('heading', { name: 'Deployment of paged web' }).waitFor();
  const done = await ended(id);
  assert.deepEqual([done.type, done.docker_image_tag, done.state], ['restore', 'v1', 'success']);
  // Once it succeeded, its page offers to run it again (a rollback to it).
  await page.getByRole('button', { name: 'Run this version again' }).waitFor();
});

test('restart asks first; keeping the service as it is sends nothing; confirmed, it runs the serving version again', async () => {
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${serviceId}`);
  const before = (await listDeployments()).length;
  await page.getByRole('button', { name: 'Restart', exact: true }).click();
  const question = page.getByRole('region', { name: 'Restart paged web?' });
  await question.getByRole('button', { name: 'Cancel' }).click();
  await question.waitFor({ state: 'detached' });
  assert.equal((await listDeployments()).length, before, 'a question answered no started nothing');

  await page.getByRole('button', { name: 'Restart', exact: true }).click();
  await question.getByRole('button', { name: 'Restart paged web' }).click();
  const done = await ended(await followedDeployment());
  assert.deepEqual([done.type, done.docker_image_tag, done.state], ['service_update', 'v1', 'success']);
});

test('a deployment on its way can be cancelled from its page, asked first; it ends failed, cancelled, and the service keeps running', async () => {
  const id = await deploy('v3');
  await page.goto(`${c.server.url}/#/deployments/${id}`);
  await page.getByRole('button', { name: 'Cancel deployment' }).click();
  const question = page.getByRole('region', { name: 'Cancel this deployment?' });
  await question.getByText('The version serving now keeps serving.').waitFor();
  await c.checkPage('cancel-deployment-question');
  await question.getByRole('button', { name: 'Cancel the deployment' }).click();
  await page.locator('.facts').getByText('cancelled').waitFor();
  const done = await ended(id);
  assert.deepEqual([done.state, done.failure_reason], ['failed', 'cancelled']);
  await page.getByRole('button', { name: 'Cancel deployment' }).waitFor({ state: 'detached' });
  const { service } = unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}', {
      params: { path: { envId: c.envId, serviceId } },
    }),
  );
  assert.equal(service.state, 'running');
});

test('with nothing to go back to, roll back says so in place and stays on the page', async () => {
  const { service } = unwrap(
    await client().POST('/v1/environments/{envId}/services', {
      params: { path: { envId: c.envId } },
      body: {
        name: 'fresh web',
        source: 'docker_image',
        type: 'web',
        docker_image: 'acme/hello',
        port: 8080,
        replica_count: 1,
        cpu_count_min: 0.5,
        memory_mb_min: 256,
      },
    }),
  );
  await page.goto(`${c.server.url}/#/envs/${c.envId}/services/${service.id}`);
  await page.getByRole('button', { name: 'Roll back', exact: true }).click();
  await page.getByRole('button', { name: 'Roll fresh web back' }).click();
  await page
    .getByRole('alert')
    .getByText('There is no earlier successful deployment to roll back to')
    .waitFor();
  assert.match(page.url(), new RegExp(`/services/${service.id}$`));
});

async function listDeployments() {
  return unwrap(
    await client().GET('/v1/environments/{envId}/services/{serviceId}/deployments', {
      params: { path: { envId: c.envId, serviceId } },
    }),
  ).deployments;
}

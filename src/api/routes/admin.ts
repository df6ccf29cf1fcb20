import { timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { NotFoundError, UnauthorizedError } from '../../domain/errors.ts';
import {
  AccountChangeBody,
  GitConnectionBody,
  GitConnectionChangeBody,
  MembershipBody,
  NewAccountBody,
  NewEnvironmentBody,
  NewUserBody,
} from '../../domain/inputs.ts';
import {
  changeAccount,
  createAccount,
  issueApiToken,
  listAccountEnvironments,
  listAccountTokens,
  readDependencyPassword,
  revokeApiToken,
} from '../../domain/usecases/accounts.ts';
import { spoolBackup } from '../../domain/usecases/backups.ts';
import type { Deps } from '../../domain/usecases/context.ts';
import { createEnvironment } from '../../domain/usecases/environments.ts';
import {
  changeGitConnection,
  createGitConnection,
  listAccountGitConnections,
  removeGitConnection,
} from '../../domain/usecases/git-connections.ts';
import { rotateMasterKey } from '../../domain/usecases/master-key.ts';
import {
  createUser,
  issueMemberToken,
  removeMembership,
  setMembership,
} from '../../domain/usecases/people.ts';
import { createSignInLink, signInLinkPath } from '../../domain/usecases/sessions.ts';
import { isUuid } from '../../domain/uuid.ts';
import { listAccounts } from '../../store/repositories/accounts.ts';
import { listMembers, listUsers } from '../../store/repositories/users.ts';
import type { AccountRow, GitConnectionRow, MembershipRow, UserRow } from '../../store/schema.ts';
import { callOf, type TokenAuthenticator } from '../plugins/auth.ts';
import type { AuthFailureLimit } from '../plugins/auth-failures.ts';
import { registerIdempotency } from '../plugins/idempotency.ts';
import { Account, ApiToken, GitConnection, MasterKeyRotation, Member, User } from '../schemas/admin.ts';
import { Envelope, errorResponses, Uuid } from '../schemas/common.ts';
import { Environment } from '../schemas/environments.ts';
import { environmentView, success } from '../views.ts';

const accountView = (a: AccountRow) => ({
  id: a.id,
  name: a.name,
  plan: a.plan,
  features: a.features,
  created_at: a.created_at.toISOString(),
  updated_at: a.updated_at.toISOString(),
});

const gitConnectionView = (c: GitConnectionRow) => ({
  id: c.id,
  account_id: c.account_id,
  kind: c.kind,
  name: c.name,
  base_url: c.base_url,
  credential: c.credential,
  github_app_id: c.github_app_id,
  github_installation_id: c.github_installation_id,
  webhook_path: `/hooks/${c.kind}/${c.id}`,
  created_at: c.created_at.toISOString(),
  updated_at: c.updated_at.toISOString(),
});

const userView = (u: UserRow) => ({
  id: u.id,
  email: u.email,
  display_name: u.display_name,
  created_at: u.created_at.toISOString(),
});

const memberView = (m: Omit<MembershipRow, 'account_id'> & { email: string; display_name: string }) => ({
  user_id: m.user_id,
  email: m.email,
  display_name: m.display_name,
  role: m.role,
  environment_ids: m.environment_ids,
  created_at: m.created_at.toISOString(),
});

const AccountParams = Type.Object({ id: Uuid });
const MemberParams = Type.Object({ id: Uuid, userId: Uuid });
const ADMIN_ERRORS = errorResponses(401, 404, 422, 500);

function assertUuid(id: string, resource: string): void {
  if (!isUuid(id)) throw new NotFoundError(resource);
}

/** The operator's API: accounts, plans, API tokens, environments. Bearer BERTH_ADMIN_TOKEN. */
export const adminRoutes: FastifyPluginAsyncTypebox<{
  deps: Deps;
  adminToken: string;
  authenticator: TokenAuthenticator;
  authFailures: AuthFailureLimit;
}> = async (app, { deps, adminToken, authenticator, authFailures }) => {
  const expected = Buffer.from(`Bearer ${adminToken}`);
  app.addHook('onRequest', async (request, reply) => {
    await authFailures.guard(request, reply, () => {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected))
        throw new UnauthorizedError();
    });
  });
  registerIdempotency(app, deps.store.db, deps.secretBox, () => 'admin');

  app.get(
    '/accounts',
    {
      schema: {
        summary: 'List accounts',
        response: { 200: Envelope(Type.Object({ accounts: Type.Array(Account) })), ...ADMIN_ERRORS },
      },
    },
    async () => success({ accounts: (await listAccounts(deps.store.db)).map(accountView) }),
  );

  app.get(
    '/dependency-passwords',
    {
      schema: {
        summary: "Read back the password a dependency's $passwordArn names",
        description:
          'Berth generates the passwords of ops.json dependencies (rds) and keeps them sealed; a service ' +
          'gets one through a `$password` export, the operator reads it here by the `$passwordArn` that ' +
          "GET .../dependencies shows. 404 when no dependency's $passwordArn is `arn`. Each read is in " +
          "the account's audit log (`dependency_password.read`, the service as its resource).",
        querystring: Type.Object(
          { arn: Type.String({ minLength: 1, maxLength: 300 }) },
          { additionalProperties: false },
        ),
        response: {
          200: Envelope(Type.Object({ arn: Type.String(), password: Type.String() })),
          ...ADMIN_ERRORS,
        },
      },
    },
    async (request) => {
      const { arn } = request.query;
      return success({ arn, password: await readDependencyPassword(deps, callOf(request), arn) });
    },
  );

  app.post(
    '/master-key/rotate',
    {
      schema: {
        summary: 'Re-seal every sealed value under the sealing master key, while the server serves',
        description:
          "Secrets, deployments' variables, dependency passwords, webhook and git connection secrets are " +
          "re-sealed in batches (BERTH_KEY_ROTATION_BATCH rows, each batch its own transaction) under BERTH_MASTER_KEY's " +
          'first key; where Berth generated the key into BERTH_DATA_DIR, it generates the new one. Idempotent: ' +
          'run it again to resume an interrupted rotation. 409 when there is nothing to rotate to, or when ' +
          'a process still seals with an old key. docs/operations.md.',
        response: {
          200: Envelope(Type.Object({ rotation: MasterKeyRotation })),
          ...errorResponses(401, 409, 422, 500),
        },
      },
    },
    async () => success({ rotation: await rotateMasterKey(deps) }),
  );

  app.get(
    '/backup',
    {
      schema: {
        summary: "Download a consistent snapshot of Berth's own state (berth admin backup)",
        description:
          "Every table of Berth's database, read in one REPEATABLE READ transaction, as one gzip file of JSON " +
          'lines: a manifest first (Berth version, migration level, created_at, the master key ids), a ' +
          'trailer last with the SHA-256 of everything before it. Sealed values stay sealed: the master key is ' +
          'not in it. `berth admin restore` restores it onto an empty database. docs/operations.md.',
        response: {
          200: {
            description: 'application/gzip: the backup file',
            content: {
              'application/gzip': {
                schema: Type.Unsafe<fs.ReadStream>({ type: 'string', format: 'binary' }),
              },
            },
          },
          ...errorResponses(401, 500),
        },
      },
    },
    async (_request, reply) => {
      const backup = await spoolBackup(deps);
      const body = fs.createReadStream(backup.file);
      body.on('close', () => void backup.remove());
      return reply
        .header('content-type', 'application/gzip')
        .header('content-disposition', `attachment; filename="${backup.name}"`)
        .send(body);
    },
  );

  app.post(
    '/accounts',
    {
      schema: {
        summary: 'Create an account',
        body: NewAccountBody,
        response: { 200: Envelope(Type.Object({ account: Account })), ...ADMIN_ERRORS },
      },
    },
    async (request) => {
      const account = await createAccount(deps, callOf(request), request.body);
      return success({ account: accountView(account) });
    },
  );

  app.patch(
    '/accounts/:id',
    {
      schema: {
        summary: "Change an account's plan or features",
        params: AccountParams,
        body: AccountChangeBody,
        response: { 200: Envelope(Type.Object({ account: Account })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const { id } = request.params;
      const account = await changeAccount(deps, callOf(request), id, request.body);
      authenticator.forget();
      return success({ account: accountView(account) });
    },
  );

  app.post(
    '/accounts/:id/api-tokens',
    {
      schema: {
        summary: 'Issue an API token (shown only in this response)',
        params: AccountParams,
        response: { 200: Envelope(Type.Object({ api_token: Uuid, token_id: Uuid })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const { id } = request.params;
      return success(await issueApiToken(deps, callOf(request), id));
    },
  );

  app.get(
    '/accounts/:id/api-tokens',
    {
      schema: {
        summary:
          "List an account's API tokens, oldest first (ids and dates; the tokens themselves are never shown again)",
        params: AccountParams,
        response: { 200: Envelope(Type.Object({ api_tokens: Type.Array(ApiToken) })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const tokens = await listAccountTokens(deps, request.params.id);
      const api_tokens = tokens.map((t) => ({
        id: t.id,
        account_id: t.account_id,
        created_at: t.created_at.toISOString(),
        revoked_at: t.revoked_at ? t.revoked_at.toISOString() : null,
      }));
      return success({ api_tokens });
    },
  );

  app.get(
    '/accounts/:id/environments',
    {
      schema: {
        summary: "List an account's environments, oldest first (deleted ones left out)",
        params: AccountParams,
        response: { 200: Envelope(Type.Object({ environments: Type.Array(Environment) })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const rows = await listAccountEnvironments(deps, request.params.id);
      return success({ environments: rows.map(environmentView) });
    },
  );

  app.delete(
    '/api-tokens/:tokenId',
    {
      schema: {
        summary: 'Revoke an API token',
        params: Type.Object({ tokenId: Uuid }),
        response: { 200: Envelope(Type.Object({ revoked: Type.Boolean() })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.tokenId, 'API token'),
    },
    async (request) => {
      await revokeApiToken(deps, callOf(request), request.params.tokenId);
      authenticator.forget();
      return success({ revoked: true });
    },
  );

  app.post(
    '/accounts/:id/environments',
    {
      schema: {
        summary:
          'Create an environment (starts provisioning; poll GET /v1/environments/{id} until available)',
        params: AccountParams,
        body: NewEnvironmentBody,
        response: { 200: Envelope(Type.Object({ environment: Environment })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const { id } = request.params;
      const env = await createEnvironment(
        deps,
        { accountId: id, tokenId: null, ...callOf(request) },
        request.body,
      );
      return success({ environment: environmentView(env) });
    },
  );

  app.post(
    '/accounts/:id/git-connections',
    {
      schema: {
        summary:
          'Connect the account to a git host (a GitHub App, or a token; GitLab: a token). Secrets are sealed and never shown again',
        params: AccountParams,
        body: GitConnectionBody,
        response: { 200: Envelope(Type.Object({ git_connection: GitConnection })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const row = await createGitConnection(deps, callOf(request), request.params.id, request.body);
      return success({ git_connection: gitConnectionView(row) });
    },
  );

  app.get(
    '/accounts/:id/git-connections',
    {
      schema: {
        summary: "List an account's git connections, oldest first (never their secrets)",
        params: AccountParams,
        response: {
          200: Envelope(Type.Object({ git_connections: Type.Array(GitConnection) })),
          ...ADMIN_ERRORS,
        },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const rows = await listAccountGitConnections(deps, request.params.id);
      return success({ git_connections: rows.map(gitConnectionView) });
    },
  );

  app.patch(
    '/git-connections/:connectionId',
    {
      schema: {
        summary: "Rotate a git connection's secrets or rename it (services keep using it)",
        params: Type.Object({ connectionId: Uuid }),
        body: GitConnectionChangeBody,
        response: { 200: Envelope(Type.Object({ git_connection: GitConnection })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.connectionId, 'Connection'),
    },
    async (request) => {
      const row = await changeGitConnection(deps, callOf(request), request.params.connectionId, request.body);
      return success({ git_connection: gitConnectionView(row) });
    },
  );

  app.delete(
    '/git-connections/:connectionId',
    {
      schema: {
        summary: 'Delete a git connection (409 while a service clones with it)',
        params: Type.Object({ connectionId: Uuid }),
        response: {
          200: Envelope(Type.Object({ deleted: Type.Boolean() })),
          ...errorResponses(401, 404, 409, 422, 500),
        },
      },
      preValidation: async (request) => assertUuid(request.params.connectionId, 'Connection'),
    },
    async (request) => {
      await removeGitConnection(deps, callOf(request), request.params.connectionId);
      return success({ deleted: true });
    },
  );
  app.post(
    '/users',
    {
      schema: {
        summary: 'Create a user (a person who can be a member of accounts)',
        description: '409 when a user has this email already (emails are compared without case).',
        body: NewUserBody,
        response: { 200: Envelope(Type.Object({ user: User })), ...errorResponses(401, 409, 422, 500) },
      },
    },
    async (request) => success({ user: userView(await createUser(deps, request.body)) }),
  );

  app.get(
    '/users',
    {
      schema: {
        summary: 'List users, oldest first',
        response: { 200: Envelope(Type.Object({ users: Type.Array(User) })), ...ADMIN_ERRORS },
      },
    },
    async () => success({ users: (await listUsers(deps.store.db)).map(userView) }),
  );

  app.get(
    '/accounts/:id/members',
    {
      schema: {
        summary: "List an account's members with their roles, oldest first",
        params: AccountParams,
        response: { 200: Envelope(Type.Object({ members: Type.Array(Member) })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => assertUuid(request.params.id, 'Account'),
    },
    async (request) => {
      const members = await listMembers(deps.store.db, request.params.id);
      return success({ members: members.map(memberView) });
    },
  );

  app.put(
    '/accounts/:id/members/:userId',
    {
      schema: {
        summary: "Make a user a member of the account with a role, or change the member's role and scope",
        description:
          "Takes effect at once in every process, the member's tokens included (docs/access.md). " +
          "environment_ids: the account's environments the member may reach; absent or null: every one. " +
          "409 when it would lower the account's last owner: make another owner first.",
        params: MemberParams,
        body: MembershipBody,
        response: {
          200: Envelope(Type.Object({ member: Member })),
          ...errorResponses(401, 404, 409, 422, 500),
        },
      },
      preValidation: async (request) => {
        assertUuid(request.params.id, 'Account');
        assertUuid(request.params.userId, 'User');
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      await setMembership(deps, callOf(request), id, userId, request.body);
      authenticator.forget();
      const member = (await listMembers(deps.store.db, id)).find((m) => m.user_id === userId);
      if (!member) throw new NotFoundError('Member');
      return success({ member: memberView(member) });
    },
  );

  app.delete(
    '/accounts/:id/members/:userId',
    {
      schema: {
        summary: "End a membership: the member's tokens in the account stop working at once",
        description:
          "409 for the account's last owner: make another owner first (PUT .../members/{userId} with the role owner).",
        params: MemberParams,
        response: {
          200: Envelope(Type.Object({ removed: Type.Boolean() })),
          ...errorResponses(401, 404, 409, 422, 500),
        },
      },
      preValidation: async (request) => {
        assertUuid(request.params.id, 'Account');
        assertUuid(request.params.userId, 'Member');
      },
    },
    async (request) => {
      await removeMembership(deps, callOf(request), request.params.id, request.params.userId);
      authenticator.forget();
      return success({ removed: true });
    },
  );

  app.post(
    '/accounts/:id/members/:userId/api-tokens',
    {
      schema: {
        summary: "Issue a token of a member, with the member's role (shown only in this response)",
        description:
          'The token belongs to the member: it does what their membership allows now, and ends with it. ' +
          'With it the member makes their own tokens (POST /v1/tokens).',
        params: MemberParams,
        response: { 200: Envelope(Type.Object({ api_token: Uuid, token_id: Uuid })), ...ADMIN_ERRORS },
      },
      preValidation: async (request) => {
        assertUuid(request.params.id, 'Account');
        assertUuid(request.params.userId, 'Member');
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      return success(await issueMemberToken(deps, callOf(request), id, userId));
    },
  );

  app.post(
    '/accounts/:id/members/:userId/sign-in-links',
    {
      schema: {
        summary: 'A one-time sign-in link of a member (shown only in this response)',
        description:
          'Opened in the console (/#/sign-in-link?token=...), it signs the member in once and lets them set a ' +
          'password; it works for a day. docs/access.md.',
        params: MemberParams,
        response: {
          200: Envelope(
            Type.Object({ token: Type.String(), path: Type.String(), expires_at: Type.String() }),
          ),
          ...ADMIN_ERRORS,
        },
      },
      preValidation: async (request) => {
        assertUuid(request.params.id, 'Account');
        assertUuid(request.params.userId, 'Member');
      },
    },
    async (request) => {
      const { id, userId } = request.params;
      const link = await createSignInLink(deps, id, userId);
      return success({
        token: link.secret,
        path: signInLinkPath(link.secret),
        expires_at: link.expiresAt.toISOString(),
      });
    },
  );
};

/**
 * How git is handed a credential: as an `Authorization` header scoped to the host's base URL, through
 * git's environment configuration (GIT_CONFIG_COUNT/KEY/VALUE). Never in the URL (git would keep it in
 * the checkout's config and print it in errors), never as an argument (`ps` shows arguments to anyone
 * on the machine; a process's environment only to its user).
 * @module
 */

/** Where a repository lives and the credential to read it with. */
export interface GitAccess {
  /** `{baseUrl}/{org}/{repo}` is cloned. */
  baseUrl: string;
  /** Basic auth user name: `x-access-token` for GitHub tokens, `oauth2` for GitLab's. */
  username: string;
  password: string;
}

/** The environment git runs with: never prompting, and with the credential if there is one. */
export function gitEnv(access: GitAccess | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // No terminal to ask on: a missing credential fails at once instead of hanging.
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    SSH_ASKPASS: '',
  };
  if (!access) return env;
  const basic = Buffer.from(`${access.username}:${access.password}`).toString('base64');
  return {
    ...env,
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: `http.${access.baseUrl.replace(/\/?$/, '/')}.extraHeader`,
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

/** git's words when a host refused to let it read a repository. */
export const GIT_ACCESS_REFUSED =
  /authentication failed|could not read username|could not read password|returned error: 40[13]|access denied|repository not found|not found: repository/i;

/** The clone URL of `org/repo` under a base URL. */
export function repoUrl(baseUrl: string, repo: string): string {
  return `${baseUrl.replace(/\/?$/, '/')}${repo}`;
}

/** The REST API of a GitHub host: api.github.com for github.com, `/api/v3` under GitHub Enterprise. */
export function githubApiUrl(baseUrl: string): string {
  return baseUrl === 'https://github.com' ? 'https://api.github.com' : `${baseUrl}/api/v3`;
}

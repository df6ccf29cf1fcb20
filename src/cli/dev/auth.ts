import fs from 'node:fs';
import readline from 'node:readline';
import { type Command, Option } from 'commander';
import { unwrap } from '../../client/index.ts';
import { withExamples } from '../help.ts';
import { common, withSession } from './common.ts';
import { configFile, readContexts, selectContext, unknownContext, writeContexts } from './contexts.ts';
import { deviceLogin } from './device-login.ts';
import { CliError, EXIT } from './errors.ts';
import { FORMATS, makeOutput } from './output.ts';
import { clientFor } from './session.ts';

const DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * A token given rather than asked for in the browser: the flag's value, BERTH_TOKEN, or the first line
 * piped or redirected in. Undefined: none was given (a terminal, or no input at all).
 */
async function givenToken(option: string | undefined): Promise<string | undefined> {
  const given = option ?? process.env.BERTH_TOKEN;
  if (given) return given.trim();
  if (process.stdin.isTTY) return undefined;
  // Only a pipe, a socket (a parent process's pipe) or a file holds a token; /dev/null (a cron job, CI)
  // holds none and is never waited on.
  const input = fs.fstatSync(0);
  if (!input.isFIFO() && !input.isFile() && !input.isSocket()) return undefined;
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  for await (const line of lines) return line.trim() || undefined;
  return undefined;
}

/** The token to log in with: given, else approved in the browser, else (an older server) typed. */
async function loginToken(url: string, options: { token?: string | true; browser: boolean }) {
  // `--token` alone: a token rather than the browser, from BERTH_TOKEN, stdin or the prompt.
  const asked = options.token === true;
  const given = await givenToken(options.token === true ? undefined : options.token);
  if (given) return { token: given };
  if (!asked) {
    // A person at a terminal sees the browser open; a script or a remote shell only gets the address.
    const granted = await deviceLogin(url, { browser: options.browser && Boolean(process.stderr.isTTY) });
    if (granted) return { token: granted.access_token, who: `${granted.email}, ${granted.role}` };
  }
  if (!process.stdin.isTTY) {
    throw new CliError(
      asked
        ? 'no API token given: pass --token <token>, set BERTH_TOKEN or pipe it in'
        : `${url} does not offer device login: pass --token <token> or pipe the token in`,
      EXIT.usage,
    );
  }
  return { token: (await readHidden('API token: ')).trim() };
}

/** A line typed on the terminal without echoing it (a token is a password): Enter ends it, Ctrl-C cancels. */
function readHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  // Echo goes off before the prompt shows: whatever is typed once it shows is never echoed.
  stdin.setRawMode(true);
  process.stderr.write(prompt);
  stdin.setEncoding('utf8');
  return new Promise<string>((resolve, reject) => {
    let typed = '';
    const done = (error?: Error) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      if (error) reject(error);
      else resolve(typed);
    };
    const onData = (chunk: string) => {
      for (const char of chunk) {
        if (char === '\r' || char === '\n' || char === '\u0004') return done();
        if (char === '\u0003') return done(new CliError('login cancelled', EXIT.usage));
        if (char === '\u007f' || char === '\b') typed = typed.slice(0, -1);
        else typed += char;
      }
    };
    stdin.on('data', onData);
    stdin.resume();
  });
}

export function authCommands(program: Command): void {
  withExamples(
    program
      .command('login')
      .description(
        'log in to a server (approving a code in its console, or with an API token) and keep it as a named context (the current one)',
      )
      .option('--url <url>', `the server (default BERTH_URL, else ${DEFAULT_URL})`)
      .option(
        '--token [token]',
        'log in with an API token rather than in the browser (default BERTH_TOKEN, else the first line of stdin; --token alone asks without echo)',
      )
      .option('--no-browser', 'print the address to approve the login at, without opening a browser')
      .option('--context <name>', 'the name to keep them under', 'default')
      .option('-e, --env <env>', 'the environment commands use by default (name or id)'),
    'login --url http://127.0.0.1:8080',
    'login --url https://berth.example.com --no-browser',
    'login --url https://berth.example.com --context prod --env production < token.txt',
    'login --token',
  ).action(
    async (options: {
      url?: string;
      token?: string | true;
      browser: boolean;
      context: string;
      env?: string;
    }) => {
      const url = (options.url ?? process.env.BERTH_URL ?? DEFAULT_URL).replace(/\/+$/, '');
      if (!/^https?:\/\//.test(url))
        throw new CliError(`--url must start with http:// or https:// (got "${url}")`, EXIT.usage);
      const { token, who } = await loginToken(url, options);
      if (!token) throw new CliError('no API token given: pass --token or pipe it in', EXIT.usage);
      const { environments } = unwrap(await clientFor({ url, token }).GET('/v1/environments'));
      let env: string | undefined;
      if (options.env !== undefined) {
        const found = environments.find((e) => e.id === options.env || e.name === options.env);
        if (!found) throw new CliError(`no environment "${options.env}" for this token`, EXIT.notFound);
        env = found.name;
      }
      const file = readContexts();
      file.contexts[options.context] = { url, token, ...(env && { env }) };
      file.current = options.context;
      writeContexts(file);
      process.stderr.write(
        `Logged in to ${url} as context "${options.context}" (${who ? `${who}; ` : ''}${environments.length} environment${environments.length === 1 ? '' : 's'}), kept in ${configFile()}\n`,
      );
    },
  );

  withExamples(
    program
      .command('logout')
      .description('forget a context and its token')
      .option('--context <name>', 'the context (default the current one)'),
    'logout',
    'logout --context prod',
  ).action((options: { context?: string }) => {
    const file = readContexts();
    const name = options.context ?? file.current;
    if (name === undefined) throw new CliError('not logged in: no context to forget', EXIT.auth);
    if (!file.contexts[name]) throw unknownContext(name, file);
    delete file.contexts[name];
    if (file.current === name) file.current = Object.keys(file.contexts)[0];
    writeContexts(file);
    process.stderr.write(`Forgot context "${name}"\n`);
  });

  withExamples(
    common(program.command('whoami').description('the server, context and account the commands use'), {
      env: false,
    }),
    'whoami',
    'whoami -o json',
  ).action(
    withSession(async (session) => {
      const environments = await session.environments();
      // The environment commands use when not told: named by BERTH_ENV or the context, else the only one.
      const chosen = await session.environment().catch(() => undefined);
      const me = {
        url: session.context.url,
        context: session.contextName ?? null,
        account_id: environments[0]?.account_id ?? null,
        environments: environments.map((e) => e.name),
        default_env: chosen?.name ?? null,
        token: `…${session.context.token.slice(-4)}`,
      };
      session.out.item(me, undefined, me);
    }),
  );

  const contexts = withExamples(
    program.command('contexts').description('the login contexts kept in your config directory'),
    'contexts ls',
  );
  withExamples(
    contexts
      .command('ls')
      .description('list the contexts (tokens are not shown)')
      .addOption(
        new Option('-o, --output <format>', 'how to print: table (default), json or yaml').choices(FORMATS),
      ),
    'contexts ls',
  ).action((options: { output?: string }) => {
    const file = readContexts();
    const rows = Object.entries(file.contexts).map(([name, c]) => ({
      name,
      url: c.url,
      env: c.env ?? null,
      current: name === file.current,
    }));
    makeOutput(options.output).list(
      rows,
      [
        { header: 'CURRENT', value: (r) => (r.current ? '*' : '') },
        { header: 'NAME', value: (r) => r.name },
        { header: 'URL', value: (r) => r.url },
        { header: 'ENV', value: (r) => r.env },
      ],
      { contexts: rows },
    );
  });
  withExamples(
    contexts.command('use <name>').description('make a context the current one'),
    'contexts use prod',
  ).action((name: string) => {
    const file = readContexts();
    if (!file.contexts[name]) throw unknownContext(name, file);
    file.current = name;
    writeContexts(file);
    selectContext(name);
    process.stderr.write(`Using context "${name}"\n`);
  });
}

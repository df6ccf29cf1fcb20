import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { api, type BerthProcess, runBerth } from '../helpers/process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * TAB completion as a user gets it: the script `berth completion <shell>` prints, sourced into plain
 * bash (no bash-completion package), zsh and fish, completing `berth ...` and `npx berth ...`, with the
 * names of the services of a running server.
 */
let started: TestServer;
let server: BerthProcess & { url: string };
let token: string;
let home: string;
const scripts: Record<string, string> = {};
before(async () => {
  started = await startTestServer('sim');
  server = started.berth;
  token = started.token;
  for (const name of ['hello web', 'hello worker']) {
    const res = await api(`${started.envUrl}/services`, token, 'POST', {
      name,
      source: 'docker_image',
      type: 'worker',
      replica_count: 1,
      cpu_count_min: 0.5,
      memory_mb_min: 256,
      docker_image: 'acme/hello',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-completion-'));
  for (const shell of ['bash', 'zsh', 'fish']) {
    const proc = runBerth(['completion', shell], {});
    assert.equal(await proc.exited, 0, proc.stderr());
    scripts[shell] = path.join(home, `berth.${shell}`);
    fs.writeFileSync(scripts[shell], proc.stdout());
  }
});
after(async () => {
  await started?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** A shell with nothing of the caller's set-up, logged in through BERTH_URL and BERTH_TOKEN. */
function shell(command: string, args: string[]) {
  return execFileSync(command, args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: '/usr/bin:/bin',
      HOME: home,
      BERTH_URL: server.url,
      BERTH_TOKEN: token,
      XDG_CACHE_HOME: path.join(home, 'cache'),
      XDG_CONFIG_HOME: path.join(home, 'config'),
    },
  });
}

/** What bash offers for the command line `words` (the last one is being completed). */
function bash(words: string[]) {
  const line = words.map((w) => `'${w}'`).join(' ');
  return shell('bash', [
    '--norc',
    '--noprofile',
    '-c',
    `source '${scripts.bash}'
COMP_WORDS=(${line}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1))
"$(complete -p "\${COMP_WORDS[0]}" | sed -E 's/.* -F ([^ ]+) .*/\\1/')"
printf '%s\\n' "\${COMPREPLY[@]}"`,
  ])
    .split('\n')
    .filter(Boolean)
    .sort();
}

test('bash without bash-completion: sourcing twice is silent; commands, options and choices complete', () => {
  assert.equal(
    shell('bash', ['--norc', '--noprofile', '-c', `source '${scripts.bash}'; source '${scripts.bash}' 2>&1`]),
    '',
  );
  assert.equal(
    shell('bash', ['--norc', '--noprofile', '-c', `source '${scripts.bash}'; complete -p berth npx`]),
    'complete -o default -F _berth_complete berth\ncomplete -o default -F _berth_complete npx\n',
  );
  assert.deepEqual(bash(['berth', 'se']), ['secrets', 'serve', 'services']);
  assert.deepEqual(bash(['berth', 'secrets', 'u']), ['unset']);
  assert.deepEqual(bash(['berth', 'services', 'ls', '-o', '']), ['json', 'table', 'yaml']);
  assert.deepEqual(bash(['berth', 'help', 'dep']), ['dependencies', 'deploy', 'deployments']);
  assert.ok(bash(['berth', 'deploy', '--w']).includes('--wait'));
  assert.deepEqual(bash(['npx', 'berth', 'dep']), ['dependencies', 'deploy', 'deployments']);
  assert.deepEqual(bash(['npx', 'other', '']), [], 'npx of another package: left to bash (file names)');
});

test('bash: deploy <TAB> offers the service names (escaped), for berth and npx berth', () => {
  assert.deepEqual(bash(['berth', 'deploy', '']), ['hello\\ web', 'hello\\ worker']);
  assert.deepEqual(bash(['npx', 'berth', 'secrets', 'set', 'hello\\ wo']), ['hello\\ worker']);
  assert.deepEqual(bash(['berth', 'logs', '"hello w']), ['"hello web"', '"hello worker"']);
  // alerts rules takes a service and has a subcommand: both are offered, then set's service.
  assert.deepEqual(bash(['berth', 'alerts', 'rules', '']), ['hello\\ web', 'hello\\ worker', 'set']);
  assert.deepEqual(bash(['berth', 'alerts', 'rules', 'set', 'hello\\ wo']), ['hello\\ worker']);
  assert.deepEqual(bash(['berth', 'alerts', 'rules', 'hello\\ web', '']), []);
});

test('zsh: sourcing twice is silent; commands and service names, for berth and npx berth', () => {
  const zsh = (words: string[]) =>
    shell('zsh', [
      '-f',
      '-c',
      `source '${scripts.zsh}'
compadd() { print -rl -- "\${(@P)\${@[-1]}}" }
words=(${words.map((w) => `'${w}'`).join(' ')}); CURRENT=\${#words}
_berth`,
    ])
      .split('\n')
      .filter(Boolean)
      .sort();
  assert.equal(shell('zsh', ['-f', '-c', `source '${scripts.zsh}'; source '${scripts.zsh}' 2>&1`]), '');
  assert.deepEqual(zsh(['berth', 'deploy', '']), ['hello web', 'hello worker']);
  assert.deepEqual(zsh(['npx', 'berth', 'se']), ['secrets', 'serve', 'services']);
});

test('fish: sourcing twice is silent; commands and service names, for berth and npx berth', () => {
  const fish = (line: string) =>
    shell('fish', ['--no-config', '-c', `source '${scripts.fish}'; complete -C '${line}'`])
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t')[0])
      .sort();
  assert.equal(
    shell('fish', ['--no-config', '-c', `source '${scripts.fish}'; source '${scripts.fish}' 2>&1`]),
    '',
  );
  assert.deepEqual(fish('berth deploy '), ['hello web', 'hello worker']);
  assert.deepEqual(fish('npx berth se'), ['secrets', 'serve', 'services']);
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import type { Command } from 'commander';
import { buildCli } from './main.ts';

function everyCommand(command: Command, path: string[] = []): [string, Command][] {
  const here: [string, Command][] = [[['berth', ...path].join(' '), command]];
  return here.concat(...command.commands.map((c) => everyCommand(c, [...path, c.name()])));
}

test('every command has a description and help that ends with an example of itself', async () => {
  const commands = everyCommand(await buildCli());
  assert.ok(commands.length >= 16, `commands found: ${commands.length}`);
  for (const [name, command] of commands) {
    let help = '';
    command.configureOutput({ writeOut: (text) => (help += text) });
    command.outputHelp();
    assert.ok(command.description(), `${name} has a description`);
    assert.match(help, /\nExamples?:\n/, `${name} --help shows an example`);
    const examples = help.slice(help.search(/\nExamples?:\n/));
    assert.ok(examples.includes(`$ ${name}`), `${name} --help shows an example of itself:\n${help}`);
  }
});

test('a mandatory option says so in its help; every -o offers the formats as its choices', async () => {
  for (const [name, command] of everyCommand(await buildCli())) {
    for (const option of command.options) {
      if (option.mandatory) assert.match(option.description, /^required: /, `${name} ${option.flags}`);
      if (option.long === '--output')
        assert.deepEqual(option.argChoices, ['table', 'json', 'yaml'], `${name} ${option.flags}`);
    }
  }
});

/** Every module (ESM and CommonJS) that building the CLI for this command line loads. */
function modulesLoadedFor(args: string[]): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({
      resolve(specifier, context, next) {
        const resolved = next(specifier, context);
        seen.add(resolved.url);
        return resolved;
      },
      load(url, context, next) {
        seen.add(url);
        return next(url, context);
      },
    });
    const { buildCli } = await import(${JSON.stringify(new URL('./main.ts', import.meta.url).href)});
    await buildCli(${JSON.stringify(args)});
    console.log(JSON.stringify([...seen]));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out) as string[];
}

test('a command line loads only its own command: no server code for a client command, no command for --version', () => {
  const server = [
    '/src/api/',
    '/src/store/',
    '/src/runtime.ts',
    '/node_modules/fastify/',
    '/@electric-sql/pglite/',
    '/node_modules/pg/',
  ];
  const client = modulesLoadedFor(['services', 'ls']);
  assert.ok(
    client.some((url) => url.endsWith('/src/cli/dev/resources.ts')),
    client.join('\n'),
  );
  for (const part of [...server, '/src/cli/dev/secrets.ts', '/src/cli/admin.ts']) {
    assert.ok(!client.some((url) => url.includes(part)), `services ls loads ${part}`);
  }
  const version = modulesLoadedFor(['--version']).filter((url) => url.includes('/src/'));
  assert.deepEqual(version.map((url) => url.slice(url.indexOf('/src/'))).sort(), [
    '/src/cli/dev/errors.ts',
    '/src/cli/help.ts',
    '/src/cli/main.ts',
  ]);
  // serve's own module is loaded, the server's code only when the command runs.
  const serve = modulesLoadedFor(['serve']);
  assert.ok(serve.some((url) => url.endsWith('/src/cli/server-commands.ts')));
  for (const part of server)
    assert.ok(!serve.some((url) => url.includes(part)), `serve --help loads ${part}`);
});

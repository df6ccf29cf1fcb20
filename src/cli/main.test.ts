import assert from 'node:assert/strict';
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

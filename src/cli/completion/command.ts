import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { withExamples } from '../help.ts';
import { completionScript, SHELLS, type Shell } from './scripts.ts';
import { completionTree } from './tree.ts';

/** `berth completion <shell>`: the script, carrying the tree of every command registered before. */
export function completionCommand(program: Command): void {
  withExamples(
    program
      .command('completion')
      .description('print the shell completion script (bash, zsh or fish), for berth and npx berth')
      .addArgument(program.createArgument('<shell>', 'bash, zsh or fish').choices(SHELLS)),
    'completion bash > /etc/bash_completion.d/berth',
    'completion zsh > ~/.zfunc/_berth',
    'completion fish > ~/.config/fish/completions/berth.fish',
  ).action((shell: Shell) => {
    const tree = completionTree(program);
    process.stdout.write(
      completionScript(shell, {
        node: process.execPath,
        // Where bin/berth.js's module.enableCompileCache() keeps them.
        compileCache: process.env.NODE_COMPILE_CACHE || path.join(os.tmpdir(), 'node-compile-cache'),
        entry: fileURLToPath(new URL('./complete.ts', import.meta.url)),
        tree: JSON.stringify(tree),
      }),
    );
  });
}

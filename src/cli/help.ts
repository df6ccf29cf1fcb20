import type { Command } from 'commander';

/** Every command's help ends with examples, as a user would type them. */
export function withExamples(command: Command, ...examples: string[]): Command {
  const lines = examples.map((example) => `  $ berth ${example}`).join('\n');
  return command.addHelpText('after', `\nExample${examples.length > 1 ? 's' : ''}:\n${lines}`);
}

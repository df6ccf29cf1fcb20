import type { Command } from 'commander';

/**
 * What completion needs to know of the command tree, as compact JSON: the completion script carries it,
 * so that a TAB neither loads nor builds the commands (complete.ts reads it).
 */
export interface CompletionNode {
  /** The description. */
  d?: string;
  /** Subcommands by name. */
  c?: Record<string, CompletionNode>;
  /** Options by flag (short and long): description, 1 when it takes a value, its choices. */
  o?: Record<string, [string, 0 | 1, string[]?]>;
  /** Positional arguments by name, `...` after a variadic one. */
  a?: string[];
}

export function completionTree(command: Command): CompletionNode {
  const node: CompletionNode = {};
  if (command.description()) node.d = command.description();
  const help = command.createHelp();
  const options: NonNullable<CompletionNode['o']> = {};
  for (const option of help.visibleOptions(command)) {
    const entry: [string, 0 | 1, string[]?] = [
      option.description,
      option.required || option.optional ? 1 : 0,
    ];
    if (option.argChoices) entry.push(option.argChoices);
    for (const flag of [option.short, option.long]) if (flag) options[flag] = entry;
  }
  node.o = options;
  const args = command.registeredArguments.map((a) => `${a.name()}${a.variadic ? '...' : ''}`);
  if (args.length > 0) node.a = args;
  const subcommands = help.visibleCommands(command);
  if (subcommands.length > 0) {
    node.c = Object.fromEntries(subcommands.map((c) => [c.name(), completionTree(c)]));
  }
  return node;
}

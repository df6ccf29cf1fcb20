/**
 * What a TAB offers, answered by a process of its own (`node complete.ts WORD...`, the words after
 * `berth`, the one being completed last) that the completion scripts start. It reads the command tree
 * from BERTH_COMPLETION_TREE (the script carries it) instead of building the commands, and service names
 * from what the CLI kept less than a minute ago; only when it has none does it ask the server (and keep
 * them). It prints one candidate a line (`value<TAB>description`) and exits 3 where a file name goes.
 */
import type { CompletionNode } from './tree.ts';

/** The word as the shell will read it: without its opening quote and backslashes (`hello\ w`). */
export function typed(word: string): string {
  return word.replace(/^["']/, '').replace(/\\(.)/g, '$1');
}

export type Candidate = [value: string, description: string];
/**
 * Candidates, or: a file name goes here, or: the names of the login contexts starting with `prefix`, or
 * of the services starting with it (where the options say).
 */
export type Completion =
  | Candidate[]
  | 'files'
  | { contexts: { prefix: string } }
  | { services: { prefix: string; context?: string; env?: string }; commands?: Candidate[] };

/** Exit status that tells the script to complete file names. */
export const FILES_STATUS = 3;

function optionOf(node: CompletionNode, root: CompletionNode, flag: string) {
  return node.o?.[flag] ?? root.o?.[flag];
}

/** The value the words gave an option under any of its flags (`-e` or `--env`). */
function flagValue(values: Map<string, string>, ...flags: string[]): string | undefined {
  for (const flag of flags) if (values.has(flag)) return values.get(flag);
  return undefined;
}

/** What completes the last word of `words` (the words after `berth`). */
export function complete(root: CompletionNode, words: string[]): Completion {
  const current = words.at(-1) ?? '';
  let node = root;
  let positional = 0;
  let pendingFlag: string | undefined;
  const values = new Map<string, string>();
  for (let i = 0; i < words.length - 1; i++) {
    const word = words[i] as string;
    if (word.startsWith('-') && word !== '-') {
      const [flag = '', inline] = word.split(/=(.*)/s);
      if (optionOf(node, root, flag)?.[1] === 1 && inline === undefined) {
        if (i + 1 === words.length - 1) pendingFlag = flag;
        else values.set(flag, words[i + 1] as string);
        i++;
      } else if (inline !== undefined) values.set(flag, inline);
      continue;
    }
    const sub = positional === 0 ? node.c?.[word] : undefined;
    if (sub) node = sub;
    else positional++;
  }
  const prefix = typed(current);
  const matching = (candidates: Candidate[]) => {
    return candidates.filter(([value]) => value.startsWith(prefix));
  };
  if (pendingFlag !== undefined) {
    const [, , choices] = optionOf(node, root, pendingFlag) ?? [];
    if (choices) return matching(choices.map((c) => [c, '']));
    if (pendingFlag === '--context') return { contexts: { prefix } };
    if (pendingFlag === '-f' || pendingFlag === '--file') return 'files';
    return [];
  }
  if (current.startsWith('-')) {
    const seen = new Set<unknown>();
    const flags: Candidate[] = [];
    for (const [flag, option] of Object.entries(node.o ?? {})) {
      if (!flag.startsWith('--') || seen.has(option)) continue;
      seen.add(option);
      flags.push([flag, option[0]]);
    }
    return matching(flags);
  }
  // A command with subcommands and arguments of its own (alerts rules <service>) offers both first.
  const commands =
    positional === 0 ? matching(Object.entries(node.c ?? {}).map(([name, sub]) => [name, sub.d ?? ''])) : [];
  if (node.c && !node.a) return commands;
  const args = node.a ?? [];
  const last = args.at(-1);
  const arg = (args[positional] ?? (last?.endsWith('...') ? last : undefined))?.replace(/\.\.\.$/, '');
  if (arg === 'service') {
    const services = { prefix, context: values.get('--context'), env: flagValue(values, '-e', '--env') };
    return commands.length > 0 ? { services, commands } : { services };
  }
  if (arg === 'file') return 'files';
  if (arg === 'command') return matching(Object.entries(root.c ?? {}).map(([n, sub]) => [n, sub.d ?? '']));
  if (arg === 'name' && node === root.c?.contexts?.c?.use) return { contexts: { prefix } };
  return commands;
}

/** The login contexts, from the config file (loaded only for this: most TABs need none of it). */
async function contextNames(prefix: string): Promise<Candidate[]> {
  const { readContexts } = await import('../dev/contexts.ts');
  return Object.entries(readContexts().contexts)
    .filter(([name]) => name.startsWith(prefix))
    .map(([name, c]) => [name, c.url]);
}

/** The environment's service names: kept ones when recent, else from the server (which keeps them). */
async function serviceNames(options: {
  prefix: string;
  context?: string;
  env?: string;
}): Promise<Candidate[]> {
  const { environmentReference, selectContext } = await import('../dev/contexts.ts');
  const { recentServiceNames } = await import('./service-names.ts');
  const { context } = selectContext(options.context);
  const env = environmentReference(options.env, context);
  let names = recentServiceNames({ url: context.url, token: context.token, env });
  if (!names) {
    const { Session } = await import('../dev/session.ts');
    const session = new Session(options);
    const environment = await session.environment();
    names = (await session.services(environment.id)).map((s) => s.name);
  }
  return names.filter((name) => name.startsWith(options.prefix)).map((name) => [name, '']);
}

async function answer(words: string[]): Promise<void> {
  const tree = JSON.parse(process.env.BERTH_COMPLETION_TREE ?? '{}') as CompletionNode;
  const completion = complete(tree, words);
  if (completion === 'files') process.exit(FILES_STATUS);
  const candidates = Array.isArray(completion)
    ? completion
    : 'contexts' in completion
      ? await contextNames(completion.contexts.prefix).catch(() => [])
      : [...(completion.commands ?? []), ...(await serviceNames(completion.services).catch(() => []))];
  for (const [value, description] of candidates)
    process.stdout.write(description ? `${value}\t${description}\n` : `${value}\n`);
}

if (import.meta.main) await answer(process.argv.slice(2));

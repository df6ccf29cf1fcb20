/**
 * The completion scripts. Each completes both `berth` and `npx berth`, runs the TAB entry point
 * (complete.ts) on this Node by absolute path, and carries the command tree with it. Sourcing one again
 * only defines the same things again.
 */
export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

export interface ScriptParts {
  /** The Node to run complete.ts on. */
  node: string;
  /** Where that Node keeps compiled modules (the CLI's own cache): a TAB then costs half the CPU. */
  compileCache: string;
  /** complete.ts. */
  entry: string;
  /** The command tree as JSON. */
  tree: string;
}

/** A word in single quotes for bash and zsh. */
const quoted = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;
/** A word in single quotes for fish. */
const fishQuoted = (text: string) => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

const HEADER = (shell: Shell) =>
  `# berth completion for ${shell}: completes \`berth\` and \`npx berth\`, with service names.
# Made by \`berth completion ${shell}\`: make it again after moving or upgrading Berth.`;

function bash({ node, compileCache, entry, tree }: ScriptParts): string {
  return `${HEADER('bash')} Plain bash is enough.
_berth_completion_tree=${quoted(tree)}
_berth_complete() {
  local first=1 line cur=\${COMP_WORDS[COMP_CWORD]}
  if [[ \${COMP_WORDS[0]##*/} == npx ]]; then
    [[ \${COMP_WORDS[1]} == berth && COMP_CWORD -ge 2 ]] || return 0
    first=2
  fi
  COMPREPLY=()
  while IFS= read -r line; do
    line=\${line%%$'\\t'*}
    case $cur in
      \\"*) COMPREPLY+=("\\"$line\\"") ;;
      \\'*) COMPREPLY+=("'$line'") ;;
      *) COMPREPLY+=("$(printf '%q' "$line")") ;;
    esac
  done < <(BERTH_COMPLETION_TREE=$_berth_completion_tree NODE_COMPILE_CACHE=${quoted(compileCache)} ${quoted(node)} ${quoted(entry)} "\${COMP_WORDS[@]:first:COMP_CWORD-first+1}" 2>/dev/null)
}
complete -o default -F _berth_complete berth npx
`;
}

function zsh({ node, compileCache, entry, tree }: ScriptParts): string {
  return `#compdef berth npx
${HEADER('zsh')}
_berth_completion_tree=${quoted(tree)}
_berth() {
  local -i first=2 code
  local out line
  local -a values displays
  if [[ \${words[1]:t} == npx ]]; then
    if [[ \${words[2]} != berth || CURRENT -lt 3 ]]; then _files; return; fi
    first=3
  fi
  out=$(BERTH_COMPLETION_TREE=$_berth_completion_tree NODE_COMPILE_CACHE=${quoted(compileCache)} ${quoted(node)} ${quoted(entry)} "\${(@)words[first,CURRENT]}" 2>/dev/null)
  code=$?
  if (( code == 3 )); then _files; return; fi
  for line in "\${(@f)out}"; do
    [[ -n $line ]] || continue
    values+=("\${line%%$'\\t'*}")
    if [[ $line == *$'\\t'* ]]; then displays+=("\${line%%$'\\t'*}  -- \${line#*$'\\t'}"); else displays+=("$line"); fi
  done
  compadd -l -d displays -a values
}
(( $+functions[compdef] )) || { autoload -Uz compinit && compinit -i; }
compdef _berth berth npx
`;
}

function fish({ node, compileCache, entry, tree }: ScriptParts): string {
  return `${HEADER('fish')}
set -g __berth_completion_tree ${fishQuoted(tree)}
function __berth_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l first 2
    if test (basename -- $words[1]) = npx
        set first 3
    end
    set -l out (env BERTH_COMPLETION_TREE=$__berth_completion_tree NODE_COMPILE_CACHE=${fishQuoted(compileCache)} ${fishQuoted(node)} ${fishQuoted(entry)} $words[$first..-1] 2>/dev/null)
    if test $status -eq 3
        __fish_complete_path (commandline -ct)
        return
    end
    printf '%s\\n' $out
end
function __berth_npx_berth
    set -l words (commandline -opc)
    test (count $words) -ge 2; and test $words[2] = berth
end
complete -c berth -f -a '(__berth_complete)'
complete -c npx -n __berth_npx_berth -f -a '(__berth_complete)'
`;
}

export function completionScript(shell: Shell, parts: ScriptParts): string {
  return { bash, zsh, fish }[shell](parts);
}

#!/usr/bin/env node
// Berth runs its TypeScript sources directly: Node 24 strips types natively (no build step to forget).
// This file is plain JavaScript that any Node can read, so that `berth` works wherever it is installed:
// on an older Node it runs itself again on the Node 24 that the package installs (the `node` package).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import module, { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REQUIRED_MAJOR = 24;
const major = Number(process.versions.node.split('.')[0]);

/** The package's own Node 24 binary, wherever npm placed the `node` package (nested or hoisted). */
function bundledNode() {
  try {
    const manifest = createRequire(import.meta.url).resolve('node/package.json');
    const binary = path.join(path.dirname(manifest), 'bin', 'node');
    return fs.existsSync(binary) ? binary : null;
  } catch {
    return null;
  }
}

/** Runs this file on `node`, passing signals on, and exits as it exits. */
function rerunOn(node) {
  const child = spawn(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
}

/**
 * A server's young generation never below 2 x 16 MB. The idle collector's memory-reducing collection
 * shrinks it to 1-2 MB, and V8 grows it back only as objects survive, which a poll hardly leaves: every
 * request after a quiet spell paid 2-8 times the scavenges (docs/performance.md, "The idle collector's
 * price"). Idle RSS did not move (measured there); V8 takes the flag from the command line only (not
 * NODE_OPTIONS, not at run time).
 */
const NEW_SPACE = '--min-semi-space-size=16';

const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-v')) {
  // Any Node can print the version: no second start on Node 24 for it.
  const manifest = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${manifest.version}\n`);
} else if (major >= REQUIRED_MAJOR) {
  const sized = process.execArgv.some((flag) => flag.startsWith('--min-semi-space-size'));
  if (args[0] === 'serve' && typeof process.execve === 'function' && !sized) {
    // The same process starts again at once (execve: same pid, no parent left behind), with the flag
    // (unless the caller chose a size of its own).
    process.execve(process.execPath, [
      process.execPath,
      ...process.execArgv,
      NEW_SPACE,
      fileURLToPath(import.meta.url),
      ...args,
    ]);
  }
  // Node keeps the compiled (and type-stripped) modules on disk: a start after the first loads its
  // ~1,300 modules about a third faster.
  module.enableCompileCache?.();
  // Before the start's first full collections: they would leave Node's nextTick slow for the process's
  // life (src/tick-shape.ts).
  if (args[0] === 'serve' || args[0] === 'worker') (await import('../src/tick-shape.ts')).keepTickShape();
  const { main } = await import('../src/cli/main.ts');
  await main(process.argv);
} else {
  const node = bundledNode();
  if (node) rerunOn(node);
  else {
    process.stderr.write(
      `berth: needs Node ${REQUIRED_MAJOR} or later (this is Node ${process.versions.node}), and its own ` +
        `Node ${REQUIRED_MAJOR} (the "node" package) is not installed: run npm install, or use Node ${REQUIRED_MAJOR}\n`,
    );
    process.exit(2);
  }
}
